// bindings.cpp — the thin nanobind layer: corral._core. No logic lives here; every engine
// error type maps one-to-one to its twin in corral/errors.py (one table: kTwins).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>


#include <algorithm>
#include <exception>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "batch.hpp"
#include "compile.hpp"
#include "artifact.hpp"
#include "automaton_memo.hpp"
#include "compile_times.hpp"
#include "json_string.hpp"
#include "matcher.hpp"
#include "regex_memo.hpp"
#include "snapshot.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace corral;

namespace {

using Bitmask = nb::ndarray<std::int32_t, nb::c_contig, nb::device::cpu>;

std::int32_t* bitmask_row(Bitmask& bm, std::size_t row, std::uint32_t words) {
  if (bm.ndim() == 1) {
    if (row != 0) throw nb::index_error("row must be 0 for a 1-D bitmask");
    if (bm.shape(0) < words)
      throw nb::value_error(("bitmask has " + std::to_string(bm.shape(0)) + " words per row, need " +
                             std::to_string(words)).c_str());
    return bm.data();
  }
  if (bm.ndim() != 2) throw nb::value_error("bitmask must be 1-D or 2-D int32");
  if (row >= bm.shape(0))
    throw nb::index_error(("row " + std::to_string(row) + " out of range for a bitmask with " +
                           std::to_string(bm.shape(0)) + " rows").c_str());
  if (bm.shape(1) < words)
    throw nb::value_error(("bitmask has " + std::to_string(bm.shape(1)) + " words per row, need " +
                           std::to_string(words)).c_str());
  return bm.data() + row * bm.shape(1);
}

// The nice value this thread's compiles run at (set_compile_nice; 0: in the calling thread).
thread_local int t_compile_nice = 0;

void add_times(CompileTimes& to, const CompileTimes& after, const CompileTimes& before) {
  to.parse_ns += after.parse_ns - before.parse_ns;
  to.lower_ns += after.lower_ns - before.lower_ns;
  to.automata_ns += after.automata_ns - before.automata_ns;
  to.bind_ns += after.bind_ns - before.bind_ns;
  to.walk_ns += after.walk_ns - before.walk_ns;
  to.compiles += after.compiles - before.compiles;
}

// Run `f` (engine work, called with the GIL released) at the calling thread's compile nice
// value: on a helper thread that lowers its own priority, while the caller waits. Why not lower
// the caller's priority instead: the caller is a Python thread, and a low-priority thread that
// holds the GIL on a busy machine is not scheduled for long stretches while every other Python
// thread (the server's decode loop) waits for the GIL it holds — priority inversion. The helper
// never touches the GIL, so only the engine's own work runs at low priority. The helper's compile
// times are added to the caller's (compile_times is per thread).
template <class F>
auto at_compile_priority(F&& f) -> decltype(f()) {
  const int nice = t_compile_nice;
  if (nice <= 0) return f();
  std::optional<decltype(f())> out;
  std::exception_ptr err;
  CompileTimes before, after;
  auto work = [&] {
#if defined(__linux__)
    // Per thread on Linux; raising one's own nice value is always permitted.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
#endif
    before = compile_times();
    try {
      out.emplace(f());
    } catch (...) {
      err = std::current_exception();
    }
    after = compile_times();
  };
  try {
    std::thread helper(work);
    helper.join();
  } catch (const std::system_error&) {  // no thread to be had: compile here, at this priority
    if (!out && !err) return f();
  }
  add_times(compile_times(), after, before);
  if (err) std::rethrow_exception(err);
  return std::move(*out);
}

Limits limits_from(const nb::dict& d) {
  Limits l;
  for (auto [k, v] : d) {
    std::string key = nb::cast<std::string>(k);
    auto val = nb::cast<std::uint32_t>(v);
    if (key == "max_nfa_states") l.max_nfa_states = val;
    else if (key == "max_dfa_states") l.max_dfa_states = val;
    else if (key == "max_total_dfa_states") l.max_total_dfa_states = val;
    else if (key == "max_nesting") l.max_nesting = val;
    else if (key == "max_productions") l.max_productions = val;
    else if (key == "max_compile_ms") l.max_compile_ms = val;
    else if (key == "max_items_per_set") l.max_items_per_set = val;
    else if (key == "max_mask_memo_mb") l.max_mask_memo_mb = val;
    else if (key == "max_slot_values") l.max_slot_values = val;
    else if (key == "max_slot_bytes") l.max_slot_bytes = val;
    else if (key == "mask_share_min_states") l.mask_share_min_states = val;
    else throw nb::type_error(("unknown limit '" + key + "'").c_str());
  }
  return l;
}

nb::dict default_limits() {
  Limits l;
  nb::dict d;
  d["max_nfa_states"] = l.max_nfa_states;
  d["max_dfa_states"] = l.max_dfa_states;
  d["max_total_dfa_states"] = l.max_total_dfa_states;
  d["max_nesting"] = l.max_nesting;
  d["max_productions"] = l.max_productions;
  d["max_compile_ms"] = l.max_compile_ms;
  d["max_items_per_set"] = l.max_items_per_set;
  d["max_mask_memo_mb"] = l.max_mask_memo_mb;
  d["max_slot_values"] = l.max_slot_values;
  d["max_slot_bytes"] = l.max_slot_bytes;
  d["mask_share_min_states"] = l.mask_share_min_states;
  return d;
}

// Error text may quote user input; decode leniently so a message can never fail to convert.
nb::object text(const std::string& s) {
  return nb::steal(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

// The one map from an engine error to its Python twin. The twin is the class of corral.errors
// with the same code (`corral.errors.error_class(code)`; the same names, parents and codes as
// kErrorTypes, which a test checks through error_types()). This table says only which
// constructor arguments each twin takes; a type not listed takes the message alone.
using TwinArgs = nb::tuple (*)(const Error&);
struct Twin {
  const char* code;
  TwinArgs args;
};
const Twin kTwins[] = {
    {CompileError::kCode,
     [](const Error& err) {
       const auto& e = static_cast<const CompileError&>(err);
       if (!e.has_position())  // Python's CompileError then prints no position
         return nb::make_tuple(text(e.bare_message()), nb::none(), nb::none(), nb::none());
       return nb::make_tuple(text(e.bare_message()), e.offset(), e.line(), e.column());
     }},
    {LimitExceeded::kCode,
     [](const Error& err) {
       const auto& e = static_cast<const LimitExceeded&>(err);
       return nb::make_tuple(e.limit(), e.given(), e.limit_value(), text(e.what()));
     }},
    {SlotError::kCode,
     [](const Error& err) {
       const auto& e = static_cast<const SlotError&>(err);
       return nb::make_tuple(text(e.what()), text(e.slot()));
     }},
    {ArtifactError::kCode,
     [](const Error& err) {
       const auto& e = static_cast<const ArtifactError&>(err);
       return nb::make_tuple(text(e.what()), e.reason());
     }},
};

void raise_twin(const Error& e) {
  nb::tuple args = nb::make_tuple(text(e.what()));
  for (const Twin& t : kTwins)
    if (std::string_view(t.code) == e.code()) args = t.args(e);
  nb::object cls = nb::module_::import_("corral.errors").attr("error_class")(e.code());
  nb::object exc = cls(*args);
  PyErr_SetObject(exc.type().ptr(), exc.ptr());
}

std::vector<std::tuple<std::string, std::string, std::string>> error_types() {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const ErrorType& t : kErrorTypes) out.emplace_back(t.name, t.parent, t.code);
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "corral's native engine (thin bindings; use the `corral` package API).";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_twin(e);
    }
  });
  m.def("error_types", &error_types,
        "Every engine error type as (name, parent name, code), base first; each has a twin of "
        "that name, parent and code in corral.errors.");

  m.def("default_limits", &default_limits, "The default compile/match limits as a dict.");

  nb::class_<Vocabulary>(m, "Vocabulary")
      .def("__init__",
           [](Vocabulary* self, const std::vector<nb::bytes>& tokens, const std::vector<std::int32_t>& special,
              const std::vector<std::int32_t>& eos, std::uint32_t width) {
             std::vector<std::string> t;
             t.reserve(tokens.size());
             for (const auto& b : tokens) t.emplace_back(b.c_str(), b.size());
             new (self) Vocabulary(std::move(t), special, eos, width);
           },
           "tokens"_a, "special_ids"_a, "eos_ids"_a, "width"_a)
      .def_prop_ro("size", &Vocabulary::size)
      .def_prop_ro("width", &Vocabulary::width)
      .def_prop_ro("mask_words", &Vocabulary::mask_words)
      .def_prop_ro("eos_ids", [](const Vocabulary& v) { return v.eos_ids(); })
      .def_prop_ro("trie_nodes", [](const Vocabulary& v) { return v.trie().num_nodes(); });

  nb::class_<Matcher>(m, "Matcher")
      .def("fill_next_token_bitmask",
           [](Matcher& self, Bitmask bitmask, std::size_t row) {
             std::int32_t* dst = bitmask_row(bitmask, row, self.compiled().vocab().mask_words());
             nb::gil_scoped_release release;
             self.fill_next_token_bitmask(dst);
           },
           nb::arg("bitmask").noconvert(), "row"_a = 0,
           "Write the allowed-token mask (packed int32: bit t of word t//32) into row `row` of "
           "`bitmask` (numpy or torch CPU int32, shape (batch, ceil(width/32)) or (words,)).")
      .def("accept_token", &Matcher::accept_token, "token_id"_a,
           "Advance by one token. Returns False (state unchanged) if the token is not allowed.")
      .def("accept_bytes",
           [](Matcher& self, nb::bytes data) { return self.accept_bytes(std::string_view(data.c_str(), data.size())); },
           "data"_a, "Advance by raw bytes (one rollback step). False (unchanged) if invalid.")
      .def("accept_string",
           [](Matcher& self, const std::string& s) { return self.accept_bytes(s); }, "text"_a,
           "Advance by the UTF-8 bytes of `text` (one rollback step).")
      .def("rollback", &Matcher::rollback, "n"_a = 1, "Undo the last n accepted steps.")
      .def("is_accepting", &Matcher::is_accepting, "Is the output so far complete (EOS allowed)?")
      .def("is_terminated", &Matcher::is_terminated, "Has EOS been accepted?")
      .def("forced_bytes",
           [](Matcher& self, std::size_t max_bytes) { auto s = self.forced_bytes(max_bytes); return nb::bytes(s.data(), s.size()); },
           "max_bytes"_a = 4096, "Bytes every valid continuation starts with (for jump-ahead).")
      .def("shortest_completion",
           [](Matcher& self, std::size_t max_bytes) { auto s = self.shortest_completion(max_bytes); return nb::bytes(s.data(), s.size()); },
           "max_bytes"_a = 1 << 20, "The shortest bytes that complete the output.")
      .def("reset", &Matcher::reset, "Back to the initial state.")
      .def("copy", [](const Matcher& self) { return Matcher(self); }, "An independent copy.")
      .def("__copy__", [](const Matcher& self) { return Matcher(self); })
      .def("snapshot",
           [](const Matcher& self) {
             std::string out = matcher_snapshot(self);
             return nb::bytes(out.data(), out.size());
           },
           "The matcher's state as snapshot bytes (snapshot.hpp): CompiledGrammar.restore on the same "
           "grammar, in any process, continues exactly. Raises ArtifactError (reason matcher_error) in "
           "the error state.")
      .def_prop_ro("num_steps", &Matcher::num_steps)
      .def_prop_ro("error", [](const Matcher& self) { return text(self.error()); },
                   "Why the matcher entered its error state ('' when healthy).");

  nb::class_<CompiledGrammar>(m, "CompiledGrammar")
      .def("matcher", [](std::shared_ptr<const CompiledGrammar> self) { return Matcher(std::move(self)); })
      .def("bind",
           [](const CompiledGrammar& self, std::map<std::string, std::vector<std::string>> slots) {
             std::vector<SlotValues> v;
             v.reserve(slots.size());
             for (auto& [name, values] : slots) v.push_back(SlotValues{name, std::move(values)});
             nb::gil_scoped_release release;
             return self.bind(v);
           },
           "slots"_a,
           "Bind every slot (${name} terminal) to its values: a grammar sharing this skeleton's "
           "automata and caches. Raises SlotError or LimitExceeded.")
      .def_prop_ro("slot_names", [](const CompiledGrammar& g) { return g.slot_names(); },
                   "The grammar's slot names, sorted.")
      .def_prop_ro("needs_binding", &CompiledGrammar::needs_binding,
                   "Does the grammar have slots that are not bound (a skeleton)?")
      .def_prop_ro("is_binding", [](const CompiledGrammar& g) { return g.skeleton() != nullptr; },
                   "Is this a binding of a skeleton's slots?")
      .def_prop_ro("grammar_text", [](const CompiledGrammar& g) { return g.grammar().to_string(); })
      .def_prop_ro("num_terminals", [](const CompiledGrammar& g) { return g.grammar().terminals.size(); })
      .def("to_bytes",
           [](const CompiledGrammar& g) {
             std::string out;
             {
               nb::gil_scoped_release release;
               out = at_compile_priority([&] { return to_artifact(g); });
             }
             return nb::bytes(out.data(), out.size());
           },
           "The grammar's immutable parts as artifact bytes (artifact.hpp). Raises SlotError for a "
           "binding.")
      .def_static("from_bytes",
                  [](nb::bytes data, std::shared_ptr<const Vocabulary> vocab, std::optional<nb::dict> limits) {
                    std::optional<Limits> l;
                    if (limits) l = limits_from(*limits);
                    std::string_view view(data.c_str(), data.size());
                    nb::gil_scoped_release release;
                    return at_compile_priority([&] { return load_artifact(view, std::move(vocab), l ? &*l : nullptr); });
                  },
                  "data"_a, "vocab"_a, "limits"_a = nb::none(),
                  "Rebuild a compiled grammar from artifact bytes for `vocab` (no parsing, lowering "
                  "or automaton construction). `limits` replaces the stored ones. Raises "
                  "ArtifactError (reason: bad_magic, unsupported_version, engine_version, "
                  "wrong_vocabulary, corrupt) or LimitExceeded.")
      .def("restore",
           [](std::shared_ptr<const CompiledGrammar> self, nb::bytes data) {
             std::string_view view(data.c_str(), data.size());
             nb::gil_scoped_release release;
             return restore_matcher(std::move(self), view);
           },
           "data"_a,
           "A matcher in the state a Matcher.snapshot() recorded (its steps replayed on this grammar). "
           "Raises ArtifactError (reason: bad_magic, unsupported_version, engine_version, "
           "wrong_vocabulary, wrong_grammar, wrong_binding, limit, corrupt).")
      .def("cache_stats", [](const CompiledGrammar& g) {
        nb::dict d;
        d["entries"] = g.cache_entries();
        d["bytes"] = g.cache_bytes();
        d["hits"] = g.cache_hits();
        d["misses"] = g.cache_misses();
        d["memo_entries"] = g.memo_entries();
        d["shared_entries"] = g.shared_entries();
        d["pool_hits"] = g.pool_hits();
        d["summary_entries"] = g.summary_entries();
        d["product_walks"] = g.product_walks();
        d["delta_entries"] = g.delta_entries();
        d["interior_walks"] = g.interior_walks();
        d["bindings"] = g.bindings_made();
        d["slot_states"] = g.slot_states();
        return d;
      });

  m.def("compile_regex",
        [](const std::string& pattern, std::shared_ptr<const Vocabulary> vocab, const nb::dict& limits) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          return at_compile_priority([&] { return compile_regex(pattern, std::move(vocab), l); });
        },
        "pattern"_a, "vocab"_a, "limits"_a);
  m.def("compile_grammar",
        [](const std::string& text, const std::string& start, std::shared_ptr<const Vocabulary> vocab,
           const nb::dict& limits) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          return at_compile_priority([&] { return compile_grammar(text, start, std::move(vocab), l); });
        },
        "text"_a, "start"_a, "vocab"_a, "limits"_a);
  m.def("compile_json",
        [](std::shared_ptr<const Vocabulary> vocab, const nb::dict& limits) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          return at_compile_priority([&] { return compile_json(std::move(vocab), l); });
        },
        "vocab"_a, "limits"_a);
  m.def("artifact_versions",
        []() {
          nb::dict d;
          d["format_version"] = kArtifactFormatVersion;
          d["engine_version"] = std::string(kEngineVersion);
          return d;
        },
        "The artifact format version this engine writes and reads, and its engine version.");
  m.def("json_grammar_text", []() { return std::string(json_grammar_text()); });
  m.def("probe_expression",
        [](const std::string& rhs, std::uint32_t max_states, const nb::dict& limits) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          ProbeResult r = probe_expression(rhs, max_states, l);
          return r.kind == ProbeResult::Kind::States ? static_cast<std::int64_t>(r.states)
                 : r.kind == ProbeResult::Kind::Empty ? std::int64_t{0}
                                                      : std::int64_t{-1};
        },
        "rhs"_a, "max_states"_a, "limits"_a,
        "DFA states of a regular grammar expression: > 0 states, 0 empty, -1 over max_states (or "
        "another limit). Raises CompileError for malformed text.");
  m.def("probe_open_ended",
        [](const std::string& rhs, std::uint32_t max_states, const nb::dict& limits, bool sinks_ok) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          return probe_open_ended(rhs, max_states, l, sinks_ok);
        },
        "rhs"_a, "max_states"_a, "limits"_a, "sinks_ok"_a = false,
        "1 when the one terminal of a regular grammar expression has infinitely many "
        "continuations after every live prefix, 0 when not (or several terminals, or empty), -1 "
        "over max_states (or another limit); with sinks_ok, accepting prefixes that allow nothing "
        "more are exempt (a quoted key: what a %key(...) needs). Raises CompileError for malformed "
        "text.");
  m.def("probe_item_values",
        [](const std::string& rhs, std::uint32_t max_states, const nb::dict& limits) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          return probe_item_values(rhs, max_states, l);
        },
        "rhs"_a, "max_states"_a, "limits"_a,
        "For a regular grammar expression that is one quoted JSON string terminal: how many "
        "distinct values it holds (capped at 4097, meaning that many or more), -1 when not such "
        "a string (or several terminals, empty, over max_states or another limit). Raises "
        "CompileError for malformed text.");
  m.def("compile_times",
        []() {
          const CompileTimes& t = compile_times();
          std::map<std::string, double> out{{"parse_ms", t.parse_ns / 1e6},
                                            {"lower_ms", t.lower_ns / 1e6},
                                            {"automata_ms", t.automata_ns / 1e6},
                                            {"bind_ms", t.bind_ns / 1e6},
                                            {"walk_ms", t.walk_ns / 1e6},
                                            {"compiles", static_cast<double>(t.compiles)}};
          return out;
        },
        "The calling thread's cumulative compile-stage times in ms (parse, lower without "
        "automata, automata, bind, mask-cache walks) and the number of compiles: benchmarks "
        "take differences around a call.");
  m.def("set_compile_nice", [](int nice) { t_compile_nice = std::clamp(nice, 0, 19); }, "nice"_a,
        "Run the compiles (compile_*, artifact to_bytes/from_bytes) this thread starts at this nice "
        "value (0-19; 0: in this thread), on a helper thread, so that this thread itself -- which "
        "holds the GIL between calls -- keeps its priority.");
  m.def("compile_nice", []() { return t_compile_nice; }, "This thread's compile nice value.");
  m.def("set_compile_clock", [](bool cpu) { set_stage_clock_cpu(cpu); }, "cpu"_a,
        "Stage timers of compile_times read each thread's CPU clock (True) or the steady wall "
        "clock (False, the default; a CPU clock read is a system call): for benchmarks on a "
        "loaded machine.");
  m.def("set_mask_fast_paths", [](bool on) { CompiledGrammar::set_mask_fast_paths(on); }, "on"_a,
        "Process-wide: False makes every mask-cache entry computed afterwards come from the "
        "reference trie walk (each frontier element stepped on its own), True (the default) lets "
        "walks use product states and derived entries. The entries are identical either way; "
        "for tests and benchmarks that compare the two.");
  m.def("set_interior_skip", [](bool on) { CompiledGrammar::set_interior_skip(on); }, "on"_a,
        "Process-wide: False stops whole-vocabulary walks from skipping the subtrees of tokens "
        "that only continue a JSON string's inside (interior_summary.hpp), so the other fast "
        "paths (product states, derived entries) are taken where they were before; True (the "
        "default) allows the skip. The entries' masks are identical either way; for tests.");
  m.def("clear_engine_caches",
        []() {
          clear_automaton_memo();
          clear_json_string_memo();
          clear_regex_memo();
        },
        "Forget the engine's process-wide automaton, JSON-spelling and regex-terminal memos (benchmarks of a "
        "process's first compile; the per-vocabulary mask pool stays).");
  m.def("automaton_memo_stats",
        []() {
          const AutomatonMemoStats s = automaton_memo_stats();
          return std::map<std::string, std::uint64_t>{
              {"entries", s.entries}, {"bytes", s.bytes}, {"hits", s.hits}, {"misses", s.misses}};
        },
        "Entries, bytes, hits and misses of the process-wide automaton memo.");
  m.def("check_regex",
        [](const std::string& pattern, const nb::dict& limits) {
          Limits l = limits_from(limits);
          nb::gil_scoped_release release;
          check_regex(pattern, l);
        },
        "pattern"_a, "limits"_a,
        "Compile a regex's automaton as compile_regex would, without a vocabulary (CompileError or "
        "LimitExceeded if it cannot).");

  m.def("fill_next_token_bitmasks",
        [](std::vector<Matcher*> matchers, Bitmask bitmask, std::vector<std::size_t> rows, std::size_t threads) {
          if (rows.empty())
            for (std::size_t i = 0; i < matchers.size(); ++i) rows.push_back(i);
          if (rows.size() != matchers.size()) throw nb::value_error("rows must have one entry per matcher");
          std::vector<std::int32_t*> dst(matchers.size());
          for (std::size_t i = 0; i < matchers.size(); ++i) {
            if (!matchers[i]) throw nb::type_error("matchers must not contain None");
            dst[i] = bitmask_row(bitmask, rows[i], matchers[i]->compiled().vocab().mask_words());
          }
          // Two matchers on one row, or one matcher twice, would race.
          std::vector<Matcher*> ms(matchers);
          std::sort(ms.begin(), ms.end());
          if (std::adjacent_find(ms.begin(), ms.end()) != ms.end())
            throw nb::value_error("the same matcher appears twice in the batch");
          std::vector<std::size_t> rs(rows);
          std::sort(rs.begin(), rs.end());
          if (std::adjacent_find(rs.begin(), rs.end()) != rs.end())
            throw nb::value_error("two matchers would write the same bitmask row");
          nb::gil_scoped_release release;
          corral::fill_next_token_bitmasks(matchers, dst, threads);
        },
        "matchers"_a, nb::arg("bitmask").noconvert(), "rows"_a = std::vector<std::size_t>(), "threads"_a = 0,
        "Fill the masks of many matchers at once (GIL released, on a persistent worker pool).");
}
