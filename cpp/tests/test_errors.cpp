// test_errors.cpp — the engine's error table (errors.hpp): every type has a unique code, a
// parent that is listed before it, and code() agrees with the table through a base reference.
// tests/test_errors.py checks the other half: each entry has a Python twin with the same
// parent and code.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compile.hpp"
#include "errors.hpp"
#include "testing.hpp"

using namespace corral;

namespace {

template <class T>
std::string code_through_base(const T& e) {
  const Error& base = e;
  return base.code();
}

}  // namespace

TEST(error_table_codes_are_unique_and_parents_listed_first) {
  std::set<std::string> codes, names;
  EXPECT_EQ(std::string(kErrorTypes[0].name), "CorralError");
  EXPECT_EQ(std::string(kErrorTypes[0].parent), "");
  for (const ErrorType& t : kErrorTypes) {
    EXPECT(codes.insert(t.code).second);
    if (*t.parent) EXPECT(names.count(t.parent) == 1);
    names.insert(t.name);
  }
  EXPECT_EQ(codes.size(), std::size(kErrorTypes));
}

TEST(error_code_is_virtual) {
  EXPECT_EQ(code_through_base(CompileError("x", 0, 1, 1)), std::string(CompileError::kCode));
  EXPECT_EQ(code_through_base(LimitExceeded("max_nfa_states", 2, 1, "big")), "limit_exceeded");
  EXPECT_EQ(code_through_base(TokenizerError("x")), "tokenizer_error");
  EXPECT_EQ(code_through_base(SlotError("s", "x")), "slot_error");
  EXPECT_EQ(code_through_base(InternalError("x")), "internal_error");
  EXPECT_EQ(code_through_base(Error("x")), "corral_error");
}

TEST(compile_error_without_position_names_none) {
  CompileError whole("the grammar is empty");
  EXPECT(!whole.has_position());
  EXPECT_EQ(std::string(whole.what()), "the grammar is empty");
  CompileError at("bad", 4, 2, 3);
  EXPECT(at.has_position());
  EXPECT_EQ(std::string(at.what()), "line 2, column 3: bad");
  // the engine's own errors about a grammar as a whole
  auto vocab = std::make_shared<const Vocabulary>(
      std::vector<std::string>{"a", "<eos>"}, std::vector<std::int32_t>{1}, std::vector<std::int32_t>{1}, 2);
  for (const char* text : {"", "x ::= \"a\"", "root ::= x\nx ::= x \"a\""}) {
    bool thrown = false;
    try {
      compile_grammar(text, "root", vocab, Limits{});
    } catch (const CompileError& e) {
      thrown = true;
      EXPECT(!e.has_position());
      EXPECT(std::string(e.what()).find("line 0") == std::string::npos);
    }
    EXPECT(thrown);
  }
}
