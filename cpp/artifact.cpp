// artifact.cpp — the compiled-grammar byte format: writer and strict reader (see artifact.hpp).
//
// Format version 6 (2 added keyed groups: the member key and role of each production and the
// group table; 3 added each group's count bounds for %unique, unique.hpp; 4 added the item
// nonterminal of %distinct groups, distinct.hpp; 5 added each keyed group's dependencies,
// keyed.hpp; 6 added the key nonterminals of groups that remember undeclared keys, keyed.hpp;
// older artifacts are refused with
// unsupported_version). Integers in the header are fixed-width little-endian; in the body they are
// unsigned LEB128 varints (at most 10 bytes, minimal: no trailing zero byte), strings are a
// varint length followed by that many bytes.
//
//   offset  size  header
//   0       8     magic 89 43 52 4C 47 0D 0A 1A ("\x89CRLG\r\n\x1a": a high byte, then CR LF
//                 and ^Z, so text-mode transfers that mangle line endings are caught)
//   8       4     format version (kArtifactFormatVersion)
//   12      4     CRC-32 (artifact_crc32) of every byte from offset 16 to the end
//   16      8     total length of the artifact in bytes, header included
//   24      16    the vocabulary's fingerprint (Vocabulary::fingerprint, two u64)
//   40            body:
//   engine version   string (kEngineVersion)
//   limits           varint count (11), then the Limits fields as varints in declaration order
//   names            varint count N >= 1, then N strings (nonterminal 0 is the augmented start)
//   productions      varint count P >= 1; each: varint lhs (< N), varint length k, then k symbols
//                    as varints (index << 1 | is_terminal; a nonterminal index < N, a terminal
//                    index < T). Production 0 is `start ::= X`, the only production of
//                    nonterminal 0. Productions are stored after Grammar::finalize, so loading
//                    finalizes again and refuses bytes in which it would drop one. After the
//                    symbols: varint (key + 2) (keyed.hpp: 0 an undeclared-key member, 1 no
//                    key, else a declared key index + 2), u8 role (0 parse and min, 1 parse
//                    only, 2 min only).
//   keyed groups     varint count G; each: varint nonterminal (< N), varint key count, varint
//                    count R then R varints: the required key indices (ascending, < key count),
//                    varint (item nonterminal + 1) (< N + 1; 0: not a %distinct group), varint
//                    minimum count (< 2^31; 1 for a keyed group without bounds), varint maximum
//                    count (same bound; 0 = no bound), varint
//                    count D (0, or the key count) then per key a varint count and that many
//                    varints: the keys it needs (ascending, < key count), varint count K
//                    then K varints: the `%key(...)` nonterminals (< N).
//                    Their consistency with the productions is checked by Grammar::finalize.
//   terminals        varint count T; each: u8 kind (0 regex, 1 token, 2 slot), string text (the
//                    printed /regex/, the token or the slot as written), then
//                      regex: DFA
//                      token: string token text, varint (id written in the grammar + 1, or 0),
//                             varint resolved id (< vocabulary size, agreeing with the text/id)
//                      slot:  string name, u8 spelling (0 raw, 1 json)
//   DFA              varint states S; if S > 0: varint start (< S), u8 classes - 1 (C), 256
//                    bytes mapping each byte to its class (classes numbered in order of their
//                    smallest byte, all C used), ceil(S/8) bytes of accepting bits (unused bits
//                    zero), S varints: each state's distance to acceptance in bytes (verified,
//                    not trusted), S*C varints: target state + 1 (0 = dead, else <= S).
//   nothing follows the last terminal.
//
// Checks, in order, each with its own ArtifactError reason: magic (bad_magic), format version
// (unsupported_version), total length and checksum (corrupt), engine version (engine_version),
// vocabulary fingerprint (wrong_vocabulary), then the body field by field (corrupt, naming the
// field and its byte offset). Derived data is recomputed or verified, never trusted: the DFAs'
// class representatives and shortest-path bytes are recomputed, their distances to acceptance
// are checked against the transitions (which also refuses a state that cannot reach
// acceptance), and the grammar's tables are rebuilt by Grammar::finalize.
// Allocation is bounded by the input: a count is accepted only if the bytes that remain could
// hold that many items of at least one byte each.
#include "artifact.hpp"

#include <array>
#include <cstring>

#include "byte_io.hpp"

namespace corral {
namespace {

constexpr char kMagic[8] = {'\x89', 'C', 'R', 'L', 'G', '\r', '\n', '\x1a'};
constexpr std::size_t kHeaderSize = 40;
constexpr std::size_t kChecksummedFrom = 16;
constexpr std::size_t kLimitFields = 11;

using byte_io::get_fixed;
using byte_io::put_fixed;

class Writer {
 public:
  std::string out;
  void u8(std::uint8_t v) { out.push_back(static_cast<char>(v)); }
  void varint(std::uint64_t v) { byte_io::put_varint(out, v); }
  void str(std::string_view s) {
    varint(s.size());
    out.append(s.data(), s.size());
  }
};

ArtifactError corrupt(const std::string& what, std::size_t at) {
  return ArtifactError("corrupt", "corrupt compiled-grammar artifact: " + what + " (at byte " + std::to_string(at) + ")");
}

// The strict cursor of byte_io.hpp, naming this format in its errors.
struct Reader : byte_io::ByteReader {
  Reader(std::string_view d, std::size_t pos) : ByteReader(d, pos, "compiled-grammar artifact") {}
};

// The Limits fields in the order the format stores them.
std::array<std::uint32_t*, kLimitFields> limit_fields(Limits& l) {
  return {&l.max_nfa_states,    &l.max_dfa_states,   &l.max_total_dfa_states, &l.max_nesting,
          &l.max_productions,   &l.max_compile_ms,   &l.max_items_per_set,    &l.max_mask_memo_mb,
          &l.max_slot_values,   &l.max_slot_bytes,   &l.mask_share_min_states};
}

}  // namespace

struct DfaCodec {
  static void write(const Dfa& d, Writer& w) {
    const std::uint32_t n = d.num_states();
    w.varint(n);
    if (n == 0) return;
    w.varint(static_cast<std::uint32_t>(d.start_));
    w.u8(static_cast<std::uint8_t>(d.num_classes_ - 1));
    for (std::uint8_t c : d.classes_) w.u8(c);
    for (std::uint32_t s = 0; s < n; s += 8) {
      std::uint8_t bits = 0;
      for (std::uint32_t k = 0; k < 8 && s + k < n; ++k) bits |= static_cast<std::uint8_t>((d.accepting_[s + k] ? 1 : 0) << k);
      w.u8(bits);
    }
    for (std::uint32_t dist : d.dist_) w.varint(dist);
    for (std::int32_t t : d.table_) w.varint(static_cast<std::uint64_t>(t + 1));
  }

  static Dfa read(Reader& r, std::size_t terminal, const Limits& limits, std::uint64_t& total_states) {
    Dfa d;
    d.class_rep_ = {0};
    const std::size_t n = r.count("DFA state count");
    if (n == 0) return d;  // the empty language
    if (n > limits.max_dfa_states)
      throw LimitExceeded("max_dfa_states", n, limits.max_dfa_states,
                          "terminal " + std::to_string(terminal) + " of the artifact has too many automaton states");
    total_states += n;
    if (total_states > limits.max_total_dfa_states)
      throw LimitExceeded("max_total_dfa_states", total_states, limits.max_total_dfa_states,
                          "the artifact's terminals need too many automaton states");
    d.start_ = static_cast<std::int32_t>(r.below(n, "DFA start state"));
    const std::size_t nc = std::size_t{r.u8("DFA class count")} + 1;
    const std::size_t map_at = r.pos();
    const char* map = r.raw(256, "DFA byte classes");
    // Canonical numbering: byte 0 is in class 0 and each new class is the next id, so every
    // class is used and its representative is its smallest byte.
    std::size_t seen = 0;
    for (std::size_t b = 0; b < 256; ++b) {
      const auto c = static_cast<std::uint8_t>(map[b]);
      if (c > seen || c >= nc) throw corrupt("byte class of byte " + std::to_string(b) + " out of order or range", map_at + b);
      if (c == seen) {
        d.class_rep_.resize(seen + 1);
        d.class_rep_[seen] = static_cast<std::uint8_t>(b);
        ++seen;
      }
      d.classes_[b] = c;
    }
    if (seen != nc) throw corrupt("DFA declares " + std::to_string(nc) + " byte classes but uses " + std::to_string(seen), map_at);
    d.num_classes_ = static_cast<std::uint32_t>(nc);
    const std::size_t acc_at = r.pos();
    const char* acc = r.raw((n + 7) / 8, "DFA accepting states");
    d.accepting_.assign(n, 0);
    for (std::size_t s = 0; s < n; ++s) d.accepting_[s] = (static_cast<unsigned char>(acc[s / 8]) >> (s % 8)) & 1;
    if (n % 8 != 0 && (static_cast<unsigned char>(acc[n / 8]) >> (n % 8)) != 0)
      throw corrupt("unused accepting bits set", acc_at + n / 8);
    // Distances to acceptance: stored, then verified row by row below (cheaper than the reverse
    // breadth-first search that built them, and exactly as strict: see verify_row).
    if (n > r.remaining()) throw corrupt("DFA distances truncated", r.pos());
    d.dist_.resize(n);
    for (std::size_t s = 0; s < n; ++s) {
      const std::size_t dat = r.pos();
      d.dist_[s] = static_cast<std::uint32_t>(r.below(n, "DFA distance to acceptance"));
      if ((d.dist_[s] == 0) != (d.accepting_[s] != 0)) throw corrupt("DFA distance of state " + std::to_string(s) + " contradicts its acceptance", dat);
    }
    if (n * nc > r.remaining()) throw corrupt("DFA transition table truncated", r.pos());
    d.table_.resize(n * nc);
    d.toward_.assign(n, 0);
    for (std::size_t s = 0; s < n; ++s) {
      const std::size_t row_at = r.pos();
      std::int32_t* row = d.table_.data() + s * nc;
      for (std::size_t c = 0; c < nc; ++c)
        row[c] = static_cast<std::int32_t>(r.below(std::uint64_t{n} + 1, "DFA transition target")) - 1;
      verify_row(d, s, terminal, row_at);
    }
    return d;
  }

  // A state's stored distance must be 0 exactly when it accepts and otherwise 1 + the smallest
  // distance among its successors. Finite values satisfying these equations are the true
  // shortest distances (induction on the value gives a path of that length; induction on the
  // true distance bounds the value), so every state is live — the invariant the matcher relies
  // on. toward_ is the smallest byte to a successor one step closer (class representatives are
  // in byte order), exactly what DfaBuilder computes.
  static void verify_row(Dfa& d, std::size_t s, std::size_t terminal, std::size_t at) {
    const std::size_t nc = d.num_classes_;
    const std::int32_t* row = d.table_.data() + s * nc;
    std::uint32_t best = 0xFFFFFFFFu;
    std::uint8_t toward = 0;
    for (std::size_t c = 0; c < nc; ++c) {
      if (row[c] < 0) continue;
      const std::uint32_t dt = d.dist_[static_cast<std::size_t>(row[c])];
      if (dt < best) best = dt, toward = d.class_rep_[c];
    }
    const std::uint32_t ds = d.dist_[s];
    if (ds == 0) return;
    if (best == 0xFFFFFFFFu || best + 1 != ds)
      throw corrupt("state " + std::to_string(s) + " of terminal " + std::to_string(terminal) +
                        "'s automaton has an inconsistent distance to acceptance (or cannot reach one)",
                    at);
    d.toward_[s] = toward;
  }
};

std::uint32_t artifact_crc32(std::string_view data) {
  // Slicing-by-8: table k maps a byte to its CRC contribution k bytes further on, so eight
  // bytes cost eight lookups and no per-bit work.
  using Tables = std::array<std::array<std::uint32_t, 256>, 8>;
  static const Tables t = [] {
    Tables x{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      x[0][i] = c;
    }
    for (std::size_t k = 1; k < 8; ++k)
      for (std::uint32_t i = 0; i < 256; ++i) x[k][i] = (x[k - 1][i] >> 8) ^ x[0][x[k - 1][i] & 0xFF];
    return x;
  }();
  auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(data[i])); };
  std::uint32_t c = 0xFFFFFFFFu;
  std::size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    const std::uint32_t lo = c ^ (byte(i) | byte(i + 1) << 8 | byte(i + 2) << 16 | byte(i + 3) << 24);
    const std::uint32_t hi = byte(i + 4) | byte(i + 5) << 8 | byte(i + 6) << 16 | byte(i + 7) << 24;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
        t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; i < data.size(); ++i) c = t[0][(c ^ byte(i)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void artifact_reseal(std::string& data) {
  if (data.size() < kHeaderSize) return;
  const std::uint32_t crc = artifact_crc32(std::string_view(data).substr(kChecksummedFrom));
  for (int i = 0; i < 4; ++i) data[12 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
}

std::string to_artifact(const CompiledGrammar& cg) {
  if (cg.skeleton())
    throw SlotError("", "a binding cannot be serialised (its slot values are per request): serialise its "
                        "skeleton and bind the loaded grammar");
  const Grammar& g = cg.grammar();
  Writer w;
  w.out.append(kMagic, sizeof kMagic);
  put_fixed(w.out, kArtifactFormatVersion, 4);
  put_fixed(w.out, 0, 4);  // checksum, filled in last
  put_fixed(w.out, 0, 8);  // total length, filled in last
  for (std::uint64_t h : cg.vocab().fingerprint()) put_fixed(w.out, h, 8);
  w.str(kEngineVersion);
  Limits limits = cg.limits();
  w.varint(kLimitFields);
  for (std::uint32_t* f : limit_fields(limits)) w.varint(*f);
  w.varint(g.names.size());
  for (const std::string& name : g.names) w.str(name);
  w.varint(g.productions.size());
  for (const Production& p : g.productions) {
    w.varint(static_cast<std::uint32_t>(p.lhs));
    w.varint(p.rhs.size());
    for (Symbol s : p.rhs)
      w.varint((static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.index())) << 1) | (s.is_terminal() ? 1 : 0));
    w.varint(static_cast<std::uint64_t>(p.key + 2));
    w.u8(p.role);
  }
  w.varint(g.keyed.size());
  for (const KeyedGroup& k : g.keyed) {
    w.varint(static_cast<std::uint32_t>(k.nt));
    w.varint(k.n_keys);
    w.varint(k.required.size());
    for (std::uint32_t r : k.required) w.varint(r);
    w.varint(static_cast<std::uint64_t>(k.value_nt + 1));
    w.varint(k.min_count);
    w.varint(k.max_count);
    w.varint(k.deps.size());
    for (const auto& d : k.deps) {
      w.varint(d.size());
      for (std::uint32_t j : d) w.varint(j);
    }
    w.varint(k.key_nts.size());
    for (std::int32_t x : k.key_nts) w.varint(static_cast<std::uint32_t>(x));
  }
  w.varint(g.terminals.size());
  for (const Terminal& t : g.terminals) {
    w.u8(t.is_token ? 1 : t.is_slot ? 2 : 0);
    w.str(terminal_text(t));
    if (t.is_token) {
      w.str(t.token.text);
      w.varint(static_cast<std::uint64_t>(static_cast<std::int64_t>(t.token.id) + 1));
      w.varint(static_cast<std::uint32_t>(t.token_id));
    } else if (t.is_slot) {
      w.str(t.slot.name);
      w.u8(t.slot.spelling == SlotSpelling::Json ? 1 : 0);
    } else {
      DfaCodec::write(t.dfa, w);
    }
  }
  std::string out = std::move(w.out);
  const std::uint64_t total = out.size();
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<char>((total >> (8 * i)) & 0xFF);
  artifact_reseal(out);
  return out;
}

namespace {

// The header checks, in order (see the top of the file). Returns the body's offset.
std::size_t check_header(std::string_view d, const Vocabulary& vocab) {
  const std::size_t m = std::min(d.size(), sizeof kMagic);
  if (d.empty() || std::memcmp(d.data(), kMagic, m) != 0)
    throw ArtifactError("bad_magic", "not a corral compiled-grammar artifact (the bytes do not start with its magic number)");
  if (d.size() < 12)
    throw corrupt("truncated: " + std::to_string(d.size()) + " bytes, shorter than the header (" + std::to_string(kHeaderSize) + ")", d.size());
  const std::uint64_t version = get_fixed(d, 8, 4);
  if (version != kArtifactFormatVersion)
    throw ArtifactError("unsupported_version", "compiled-grammar artifact format version " + std::to_string(version) +
                                                   " is not supported (this engine reads version " +
                                                   std::to_string(kArtifactFormatVersion) + "): recompile it");
  if (d.size() < kHeaderSize)
    throw corrupt("truncated: " + std::to_string(d.size()) + " bytes, shorter than the header (" + std::to_string(kHeaderSize) + ")", d.size());
  const std::uint64_t total = get_fixed(d, 16, 8);
  if (total != d.size())
    throw corrupt(total > d.size() ? "truncated: " + std::to_string(d.size()) + " of " + std::to_string(total) + " bytes"
                                   : std::to_string(d.size() - total) + " bytes after the end the header gives (" + std::to_string(total) + ")",
                  std::min<std::uint64_t>(total, d.size()));
  const auto crc = static_cast<std::uint32_t>(get_fixed(d, 12, 4));
  if (crc != artifact_crc32(d.substr(kChecksummedFrom)))
    throw corrupt("checksum mismatch: the bytes were damaged or modified", 12);
  Reader r(d, kHeaderSize);
  const std::string engine = r.str("engine version");
  if (engine != kEngineVersion)
    throw ArtifactError("engine_version", "compiled-grammar artifact was made by engine version '" + engine +
                                              "', this is '" + kEngineVersion + "': recompile it");
  const auto& fp = vocab.fingerprint();
  if (get_fixed(d, 24, 8) != fp[0] || get_fixed(d, 32, 8) != fp[1])
    throw ArtifactError("wrong_vocabulary", "compiled-grammar artifact was compiled for another vocabulary (its fingerprint "
                                                "differs from this tokenizer's): recompile it for this tokenizer");
  return r.pos();
}

Terminal read_terminal(Reader& r, std::size_t i, const Vocabulary& vocab, const Limits& limits, std::uint64_t& total_states) {
  Terminal t;
  const std::size_t at = r.pos();
  const std::uint8_t kind = r.u8("terminal kind");
  if (kind > 2) throw corrupt("terminal " + std::to_string(i) + " has unknown kind " + std::to_string(kind), at);
  t.text = r.str("terminal text");
  if (kind == 0) {
    t.dfa = DfaCodec::read(r, i, limits, total_states);
  } else if (kind == 1) {
    t.is_token = true;
    t.token.text = r.str("token text");
    const std::uint64_t id1 = r.below(std::uint64_t{vocab.size()} + 1, "token id");
    t.token.id = static_cast<std::int32_t>(id1) - 1;
    const std::size_t rat = r.pos();
    t.token_id = static_cast<std::int32_t>(r.below(vocab.size(), "resolved token id"));
    const bool agrees = t.token.id >= 0 ? t.token_id == t.token.id : vocab.bytes(t.token_id) == t.token.text;
    if (!agrees) throw corrupt("terminal " + std::to_string(i) + " names a token that resolves to another id", rat);
  } else {
    t.is_slot = true;
    t.slot.name = r.str("slot name");
    const std::size_t sat = r.pos();
    const std::uint8_t sp = r.u8("slot spelling");
    if (sp > 1) throw corrupt("unknown slot spelling " + std::to_string(sp), sat);
    t.slot.spelling = sp ? SlotSpelling::Json : SlotSpelling::Raw;
    if (t.slot.name.empty()) throw corrupt("slot terminal without a name", sat);
  }
  return t;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> load_artifact(std::string_view data, std::shared_ptr<const Vocabulary> vocab,
                                                     const Limits* override_limits) {
  CORRAL_CHECK(vocab != nullptr, "null vocabulary");
  Reader r(data, check_header(data, *vocab));
  Limits stored;
  {
    const std::size_t at = r.pos();
    if (r.varint("limit count") != kLimitFields) throw corrupt("unexpected number of limits", at);
    for (std::uint32_t* f : limit_fields(stored)) *f = static_cast<std::uint32_t>(r.below(std::uint64_t{1} << 32, "limit"));
  }
  const Limits limits = override_limits ? *override_limits : stored;

  Grammar g;
  std::size_t at = r.pos();
  const std::size_t names = r.count("nonterminal count");
  if (names == 0) throw corrupt("no nonterminals", at);
  g.names.reserve(names);
  for (std::size_t i = 0; i < names; ++i) g.names.push_back(r.str("nonterminal name"));

  at = r.pos();
  const std::size_t prods = r.count("production count", 2);
  if (prods == 0) throw corrupt("no productions", at);
  if (prods > limits.max_productions)
    throw LimitExceeded("max_productions", prods, limits.max_productions, "the artifact's grammar has too many productions");
  g.productions.resize(prods);
  // Symbols are checked against the terminal count once it is known (terminals come later).
  std::vector<std::pair<std::size_t, std::size_t>> terminal_refs;  // (symbol's byte offset, index)
  for (std::size_t p = 0; p < prods; ++p) {
    Production& prod = g.productions[p];
    const std::size_t lat = r.pos();
    prod.lhs = static_cast<std::int32_t>(r.below(names, "production lhs"));
    if ((p == 0) != (prod.lhs == 0)) throw corrupt("nonterminal 0 must have exactly one production, production 0", lat);
    const std::size_t k = r.count("production length");
    if (p == 0 && k != 1) throw corrupt("production 0 must be `start ::= X` (one symbol)", lat);
    prod.rhs.reserve(k);
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t sat = r.pos();
      const std::uint64_t v = r.below(std::uint64_t{1} << 32, "symbol");
      const std::uint64_t index = v >> 1;
      if (v & 1) {
        terminal_refs.emplace_back(sat, static_cast<std::size_t>(index));
        prod.rhs.push_back(Symbol::terminal(static_cast<std::int32_t>(index)));
      } else {
        if (index >= names) throw corrupt("symbol names nonterminal " + std::to_string(index) + " of " + std::to_string(names), sat);
        prod.rhs.push_back(Symbol::nonterminal(static_cast<std::int32_t>(index)));
      }
    }
    prod.key = static_cast<std::int32_t>(r.below(std::uint64_t{1} << 31, "production key")) - 2;
    const std::size_t role_at = r.pos();
    prod.role = r.u8("production role");
    if (prod.role > kMinOnly) throw corrupt("production role " + std::to_string(prod.role) + " is not 0, 1 or 2", role_at);
  }
  at = r.pos();
  const std::size_t groups = r.count("keyed group count");
  if (groups > names) throw corrupt("more keyed groups than nonterminals", at);
  g.keyed.resize(groups);
  for (KeyedGroup& k : g.keyed) {
    k.nt = static_cast<std::int32_t>(r.below(names, "keyed group nonterminal"));
    k.n_keys = static_cast<std::uint32_t>(r.below(prods + 1, "keyed group key count"));
    const std::size_t nreq = r.count("keyed group required count");
    if (nreq > k.n_keys) throw corrupt("a keyed group requires more keys than it has", r.pos());
    for (std::size_t i = 0; i < nreq; ++i)
      k.required.push_back(static_cast<std::uint32_t>(r.below(k.n_keys, "keyed group required key")));
    // Count bounds (unique.hpp); their consistency is checked by Grammar::finalize.
    k.value_nt = static_cast<std::int32_t>(r.below(names + 1, "distinct group item nonterminal")) - 1;
    // Counted %keyed groups count undeclared members too, so their bounds may pass the key count.
    const std::uint64_t bound = std::uint64_t{1} << 31;
    k.min_count = static_cast<std::uint32_t>(r.below(bound, "unique group minimum count"));
    k.max_count = static_cast<std::uint32_t>(r.below(bound, "unique group maximum count"));
    // Dependencies (keyed.hpp); their consistency is checked by Grammar::finalize too.
    const std::size_t ndeps = r.count("keyed group dependency count");
    if (ndeps != 0 && ndeps != k.n_keys) throw corrupt("a keyed group's dependency table does not fit its keys", r.pos());
    k.deps.resize(ndeps);
    for (auto& d : k.deps) {
      const std::size_t nd = r.count("keyed group dependencies of a key");
      if (nd > k.n_keys) throw corrupt("a key depends on more keys than its group has", r.pos());
      for (std::size_t i = 0; i < nd; ++i)
        d.push_back(static_cast<std::uint32_t>(r.below(k.n_keys, "keyed group dependency")));
    }
    // Remembered undeclared keys (keyed.hpp); checked by Grammar::finalize too.
    const std::size_t nkeys = r.count("keyed group key nonterminal count");
    if (nkeys > names) throw corrupt("a keyed group names more key nonterminals than there are", r.pos());
    for (std::size_t i = 0; i < nkeys; ++i)
      k.key_nts.push_back(static_cast<std::int32_t>(r.below(names, "keyed group key nonterminal")));
  }

  at = r.pos();
  const std::size_t terms = r.count("terminal count", 2);
  for (const auto& [sat, index] : terminal_refs)
    if (index >= terms) throw corrupt("symbol names terminal " + std::to_string(index) + " of " + std::to_string(terms), sat);
  g.terminals.reserve(terms);
  std::uint64_t total_states = 0;
  for (std::size_t i = 0; i < terms; ++i) g.terminals.push_back(read_terminal(r, i, *vocab, limits, total_states));
  if (!r.done()) throw corrupt(std::to_string(r.remaining()) + " unexpected bytes after the last terminal", r.pos());

  // Grammar::finalize's fixpoints take up to one pass over every production per nonterminal
  // that has productions (a chain stored in the wrong order needs all of them), so hostile
  // bytes could make it quadratic. Bound that worst case by max_productions, which a trusted
  // caller can raise: the default allows 2e9 symbol visits (seconds; the largest jsonschemabench
  // grammar needs about 4.5e8 by this bound and far fewer in fact), against the hours an
  // artifact of 100,000 productions in the worst order would take.
  {
    std::vector<std::uint8_t> has_prods(names, 0);
    std::uint64_t symbols = 0, lhs_count = 0;
    for (const Production& p : g.productions) {
      symbols += p.rhs.size() + 1;
      if (!has_prods[static_cast<std::size_t>(p.lhs)]) has_prods[static_cast<std::size_t>(p.lhs)] = 1, ++lhs_count;
    }
    constexpr std::uint64_t kWorkPerProduction = 20000;
    const std::uint64_t work = (lhs_count + 1) * symbols;
    if (work > std::uint64_t{limits.max_productions} * kWorkPerProduction)
      throw LimitExceeded("max_productions", (work + kWorkPerProduction - 1) / kWorkPerProduction, limits.max_productions,
                          "rebuilding the artifact grammar's tables could take " + std::to_string(work) +
                              " steps (nonterminals x symbols; " + std::to_string(kWorkPerProduction) +
                              " per allowed production)");
  }
  try {
    g.finalize();
  } catch (const CompileError& e) {
    throw corrupt(std::string("the grammar is not valid: ") + e.what(), at);
  }
  if (g.productions.size() != prods) throw corrupt("the grammar has productions that can never complete", at);
  return std::make_shared<const CompiledGrammar>(std::move(vocab), std::move(g), limits);
}

}  // namespace corral
