// snapshot.cpp — the matcher snapshot byte format: writer and strict reader (see snapshot.hpp).
//
// Format version 1. Header integers are fixed-width little-endian; body integers are unsigned
// LEB128 varints (minimal, at most 10 bytes); strings are a varint length and that many bytes.
// The header mirrors the compiled-grammar artifact's (artifact.cpp) so the two are checked alike.
//
//   offset  size  header
//   0       8     magic 89 43 52 4C 4D 0D 0A 1A ("\x89CRLM\r\n\x1a"; the artifact's is CRLG)
//   8       4     snapshot format version (kSnapshotFormatVersion)
//   12      4     CRC-32 (artifact_crc32) of every byte from offset 16 to the end
//   16      8     total length in bytes, header included
//   24      16    the vocabulary's fingerprint (Vocabulary::fingerprint)
//   40      16    the grammar's identity (CompiledGrammar::snapshot_identity()[0..1]): a hash
//                 of its artifact bytes from the engine version on, the limits left out (a
//                 grammar loaded with other limits is the same grammar; replay runs under the
//                 restoring grammar's limits)
//   56      16    the binding's identity ([2..3]: a hash of the slot automata; zero unbound)
//   72            body:
//   engine version   string (kEngineVersion)
//   artifact format  varint (kArtifactFormatVersion: the identity hashes that encoding)
//   steps            varint count N; each: u8 kind, then
//                      0 bytes:  string (what accept_bytes / a token's bytes consumed)
//                      1 token:  varint token id (< vocabulary size; a token the grammar names)
//                      2 eos:    varint token id (< vocabulary size); only as the last step
//   state            16 bytes: the parser's state signature after the last step (two u64 LE),
//                    then u8 flags (bit 0 accepting, bit 1 terminated; other bits zero)
//   nothing follows.
//
// Checks, in order, each with its own ArtifactError reason: magic (bad_magic), format version
// (unsupported_version), total length and checksum (corrupt), engine version (engine_version),
// artifact format version (unsupported_version), vocabulary fingerprint (wrong_vocabulary),
// grammar identity (wrong_grammar), binding identity (wrong_binding), then the body field by
// field (corrupt, naming the field and byte offset). Every step is replayed through the
// matcher's public accept path and must be accepted as the same kind of step (a token step
// must be matched as the named token, an EOS step must end the output); a step the grammar
// refuses is corrupt, one that hits a parser limit is `limit`. Finally the replayed state's
// signature and flags must equal the stored ones (corrupt otherwise). No count is trusted for
// an allocation beyond the bytes that remain.
#include "snapshot.hpp"

#include <array>
#include <cstring>
#include <mutex>

#include "artifact.hpp"
#include "byte_io.hpp"

namespace corral {
namespace {

constexpr char kMagic[8] = {'\x89', 'C', 'R', 'L', 'M', '\r', '\n', '\x1a'};
constexpr std::size_t kHeaderSize = 72;
constexpr std::size_t kChecksummedFrom = 16;

using byte_io::get_fixed;
using byte_io::put_fixed;
using byte_io::put_varint;


ArtifactError corrupt(const std::string& what, std::size_t at) {
  return ArtifactError("corrupt", "corrupt matcher snapshot: " + what + " (at byte " + std::to_string(at) + ")");
}

// The strict cursor of byte_io.hpp over snapshot bytes (and, trusted, over artifact bytes for
// the identity), naming this format in its errors.
struct Reader : byte_io::ByteReader {
  Reader(std::string_view d, std::size_t pos) : ByteReader(d, pos, "matcher snapshot") {}
};

// A 128-bit content hash: two independent multiply-rotate lanes, each finished with the
// splitmix64 avalanche. Identities catch mistakes (restoring on the wrong grammar), not
// attacks: safety never depends on them, since every restored step is replayed.
class Hash128 {
 public:
  void add(std::uint64_t x) {
    a_ = rotl((a_ ^ x) * 0x9E3779B97F4A7C15ull, 29);
    b_ = rotl((b_ ^ x) * 0xC2B2AE3D27D4EB4Full, 31) + 0x165667B19E3779F9ull;
  }
  void add_bytes(std::string_view s) {
    add(s.size());
    std::uint64_t w = 0;
    int k = 0;
    for (char c : s) {
      w |= static_cast<std::uint64_t>(static_cast<unsigned char>(c)) << (8 * k);
      if (++k == 8) add(w), w = 0, k = 0;
    }
    add(w);
  }
  std::array<std::uint64_t, 2> finish() const { return {mix(a_), mix(b_ ^ a_)}; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t a_ = 0x636F7272616C2E6Dull, b_ = 0x61746368657221ull;  // "corral.m", "atcher!"
};

// The artifact bytes from the engine version on, without the limits: the artifact's layout is
// header (40 bytes), engine version string, varint limit count, that many varints.
std::array<std::uint64_t, 2> grammar_identity(const CompiledGrammar& g) {
  const std::string art = to_artifact(g);
  Reader r(art, 40);
  Hash128 h;
  h.add(kArtifactFormatVersion);
  h.add_bytes(r.view("engine version"));
  const std::size_t limits = r.count("limit count");
  for (std::size_t i = 0; i < limits; ++i) r.varint("limit");
  h.add_bytes(std::string_view(art).substr(r.pos()));
  return h.finish();
}

// A binding's slot automata, state by state (bind() builds them deterministically from the
// sorted values, so equal values give equal automata in any process).
std::array<std::uint64_t, 2> binding_identity(const CompiledGrammar& g) {
  Hash128 h;
  const auto& terminals = g.grammar().terminals;
  for (std::size_t t = 0; t < terminals.size(); ++t) {
    if (!terminals[t].is_slot) continue;
    const Dfa& d = *g.dfas()[t];
    h.add(t);
    h.add(d.num_states());
    h.add(static_cast<std::uint32_t>(d.start()));
    if (d.num_states() == 0) continue;
    h.add(d.num_classes());
    for (int b = 0; b < 256; ++b) h.add(d.byte_class(static_cast<std::uint8_t>(b)));
    for (std::uint32_t s = 0; s < d.num_states(); ++s) {
      const auto st = static_cast<std::int32_t>(s);
      h.add(d.accepting(st) ? 1 : 0);
      for (std::uint32_t c = 0; c < d.num_classes(); ++c) h.add(static_cast<std::uint32_t>(d.next_by_class(st, c)));
    }
  }
  return h.finish();
}

std::size_t check_header(std::string_view d, const CompiledGrammar& g) {
  const std::size_t m = std::min(d.size(), sizeof kMagic);
  if (d.empty() || std::memcmp(d.data(), kMagic, m) != 0)
    throw ArtifactError("bad_magic", "not a corral matcher snapshot (the bytes do not start with its magic number)");
  if (d.size() < 12)
    throw corrupt("truncated: " + std::to_string(d.size()) + " bytes, shorter than the header (" + std::to_string(kHeaderSize) + ")", d.size());
  const std::uint64_t version = get_fixed(d, 8, 4);
  if (version != kSnapshotFormatVersion)
    throw ArtifactError("unsupported_version", "matcher snapshot format version " + std::to_string(version) +
                                                   " is not supported (this engine reads version " +
                                                   std::to_string(kSnapshotFormatVersion) + ")");
  if (d.size() < kHeaderSize)
    throw corrupt("truncated: " + std::to_string(d.size()) + " bytes, shorter than the header (" + std::to_string(kHeaderSize) + ")", d.size());
  const std::uint64_t total = get_fixed(d, 16, 8);
  if (total != d.size())
    throw corrupt(total > d.size() ? "truncated: " + std::to_string(d.size()) + " of " + std::to_string(total) + " bytes"
                                   : std::to_string(d.size() - total) + " bytes after the end the header gives (" + std::to_string(total) + ")",
                  std::min<std::uint64_t>(total, d.size()));
  if (static_cast<std::uint32_t>(get_fixed(d, 12, 4)) != artifact_crc32(d.substr(kChecksummedFrom)))
    throw corrupt("checksum mismatch: the bytes were damaged or modified", 12);
  Reader r(d, kHeaderSize);
  const std::string_view engine = r.view("engine version");
  if (engine != kEngineVersion)
    throw ArtifactError("engine_version", "matcher snapshot was taken by engine version '" + std::string(engine) +
                                              "', this is '" + kEngineVersion + "': snapshots do not cross engine versions");
  const std::size_t at = r.pos();
  const std::uint64_t art = r.varint("artifact format version");
  if (art != kArtifactFormatVersion)
    throw ArtifactError("unsupported_version", "matcher snapshot names artifact format version " + std::to_string(art) +
                                                   " (this engine writes version " + std::to_string(kArtifactFormatVersion) +
                                                   ", at byte " + std::to_string(at) + ")");
  const auto& fp = g.vocab().fingerprint();
  if (get_fixed(d, 24, 8) != fp[0] || get_fixed(d, 32, 8) != fp[1])
    throw ArtifactError("wrong_vocabulary", "matcher snapshot was taken with another vocabulary (its fingerprint differs "
                                                "from this tokenizer's)");
  const auto& id = g.snapshot_identity();
  if (get_fixed(d, 40, 8) != id[0] || get_fixed(d, 48, 8) != id[1])
    throw ArtifactError("wrong_grammar", "matcher snapshot was taken on another grammar (its identity differs from this "
                                             "compiled grammar's): restore it on the same constraint, compiled or loaded");
  if (get_fixed(d, 56, 8) != id[2] || get_fixed(d, 64, 8) != id[3]) {
    const bool snap_bound = get_fixed(d, 56, 8) != 0 || get_fixed(d, 64, 8) != 0;
    const bool here_bound = id[2] != 0 || id[3] != 0;
    throw ArtifactError("wrong_binding", snap_bound && here_bound
                                             ? "matcher snapshot was taken on another binding of this grammar's slots: "
                                               "bind the same values and restore on that binding"
                                         : snap_bound ? "matcher snapshot was taken on a binding of this grammar's slots: "
                                                        "bind the same values and restore on the binding"
                                                      : "matcher snapshot was taken on the grammar without slot values, "
                                                        "this is a binding");
  }
  return r.pos();
}

}  // namespace

const std::array<std::uint64_t, 4>& CompiledGrammar::snapshot_identity() const {
  std::call_once(identity_once_, [this] {
    const auto grammar = skeleton_ ? skeleton_->snapshot_identity() : std::array<std::uint64_t, 4>{};
    const auto own = skeleton_ ? std::array<std::uint64_t, 2>{grammar[0], grammar[1]} : grammar_identity(*this);
    const auto bound = skeleton_ ? binding_identity(*this) : std::array<std::uint64_t, 2>{0, 0};
    identity_ = {own[0], own[1], bound[0], bound[1]};
  });
  return identity_;
}

// Matcher's friend: reads the step log, replays steps, compares the parser's signature.
struct SnapshotCodec {
  static std::string write(const Matcher& m) {
    if (!m.error_.empty())
      throw ArtifactError("matcher_error", "a matcher in its error state has no state to continue from (" + m.error_ +
                                               "): roll it back and snapshot then");
    const CompiledGrammar& g = *m.grammar_;
    std::string out(kMagic, sizeof kMagic);
    put_fixed(out, kSnapshotFormatVersion, 4);
    put_fixed(out, 0, 4);  // checksum, filled in last
    put_fixed(out, 0, 8);  // total length, filled in last
    for (std::uint64_t h : g.vocab().fingerprint()) put_fixed(out, h, 8);
    for (std::uint64_t h : g.snapshot_identity()) put_fixed(out, h, 8);
    put_varint(out, std::strlen(kEngineVersion));
    out += kEngineVersion;
    put_varint(out, kArtifactFormatVersion);
    put_varint(out, m.steps_.size());
    std::size_t begin = 0;
    for (const Matcher::StepLog& s : m.steps_) {
      out.push_back(static_cast<char>(s.kind));
      if (s.kind == Matcher::StepLog::kBytes) {
        put_varint(out, s.end - begin);
        out.append(m.log_bytes_, begin, s.end - begin);
      } else {
        put_varint(out, static_cast<std::uint32_t>(s.token));
      }
      begin = s.end;
    }
    const auto sig = m.parser_.state_signature();
    put_fixed(out, sig.first, 8);
    put_fixed(out, sig.second, 8);
    out.push_back(static_cast<char>((m.is_accepting() ? 1 : 0) | (m.terminated_ ? 2 : 0)));
    const std::uint64_t total = out.size();
    for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<char>((total >> (8 * i)) & 0xFF);
    snapshot_reseal(out);
    return out;
  }

  static Matcher read(std::shared_ptr<const CompiledGrammar> grammar, std::string_view d) {
    CORRAL_CHECK(grammar != nullptr, "null grammar");
    Reader r(d, check_header(d, *grammar));
    const std::uint32_t vocab_size = grammar->vocab().size();
    Matcher m(std::move(grammar));
    // A step takes at least two bytes (kind and a one-byte length or id).
    const std::size_t n = r.count("step count", 2);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t at = r.pos();
      const std::uint8_t kind = r.u8("step kind");
      bool ok = false;
      if (kind == Matcher::StepLog::kBytes) {
        ok = m.accept_bytes(r.view("step bytes"));
      } else if (kind == Matcher::StepLog::kToken || kind == Matcher::StepLog::kEos) {
        if (kind == Matcher::StepLog::kEos && k + 1 != n) throw corrupt("an EOS step before the last step", at);
        const auto id = static_cast<std::int32_t>(r.below(vocab_size, "step token id"));
        // accept_token takes the path the original did (named token, EOS or the token's bytes)
        // for the same id and state; the step must have been taken the recorded way.
        ok = m.accept_token(id) && m.steps_.back().kind == kind;
      } else {
        throw corrupt("unknown step kind " + std::to_string(kind), at);
      }
      if (!ok) {
        if (!m.error_.empty())
          throw ArtifactError("limit", "replaying matcher snapshot step " + std::to_string(k) + " hit a limit of this "
                                       "compiled grammar (" + m.error_ + "; at byte " + std::to_string(at) + ")");
        throw corrupt("step " + std::to_string(k) + " is not accepted by the grammar", at);
      }
    }
    const std::size_t at = r.pos();
    const std::string_view sig = r.bytes(16, "state signature");
    const std::uint8_t flags = r.u8("state flags");
    if (!r.done()) throw corrupt(std::to_string(r.remaining()) + " unexpected bytes after the state", r.pos());
    if (flags > 3) throw corrupt("unknown state flags " + std::to_string(flags), at + 16);
    const auto mine = m.parser_.state_signature();
    if (get_fixed(sig, 0, 8) != mine.first || get_fixed(sig, 8, 8) != mine.second ||
        (flags & 1) != (m.is_accepting() ? 1 : 0) || ((flags >> 1) & 1) != (m.terminated_ ? 1 : 0))
      throw corrupt("the replayed steps reach another state than the one recorded", at);
    return m;
  }
};

std::string matcher_snapshot(const Matcher& m) { return SnapshotCodec::write(m); }

Matcher restore_matcher(std::shared_ptr<const CompiledGrammar> grammar, std::string_view data) {
  return SnapshotCodec::read(std::move(grammar), data);
}

void snapshot_reseal(std::string& data) {
  if (data.size() < kHeaderSize) return;
  const std::uint32_t crc = artifact_crc32(std::string_view(data).substr(kChecksummedFrom));
  for (int i = 0; i < 4; ++i) data[12 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
}

}  // namespace corral
