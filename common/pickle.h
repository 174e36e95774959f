// A small, safe Python pickle codec for the values Swift keeps in pickles.
//
// Swift stores object metadata in xattrs (protocol 2), hashes.pkl and REPLICATE answers
// (protocol 2) and async_pending files (protocol 0) as pickles (swift-protocol.md §7.5-7.7, §8).
// This codec reads and writes exactly the plain data those hold: None, bool, int (64-bit),
// float, str, bytes, list, tuple and dict. It never runs code: loads() accepts only the few
// globals Swift's pickles name (listed at loads()) and emulates each one, and it bounds the
// memory, time and nesting a hostile input can cost.
//
// Text: a Python str is held as UTF-8 in a std::string. Python strs may hold lone surrogates
// (U+D800-U+DFFF; a protocol-0 "\ud800", or Swift's 'surrogateescape' for undecodable bytes);
// those are kept in the 3-byte form Python's 'surrogatepass' handler uses (ED A0 80 ... ED BF
// BF), so they survive a round trip. bytes are raw bytes in a std::string.
//
// Thread-compatible: a Value is a plain value (copies are deep, nothing is shared). loads(),
// dumps() and the metadata helpers are pure functions, safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace apus::common::pickle {

// A Python value of one of the types Swift pickles.
class Value {
 public:
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict };
  using List = std::vector<Value>;                    // items of a list or a tuple
  using Dict = std::vector<std::pair<Value, Value>>;  // entries in insertion order

  Value() = default;  // None

  static Value none() { return Value(); }
  static Value boolean(bool b) { return Value(Kind::kBool, b); }
  static Value integer(int64_t i) { return Value(Kind::kInt, i); }
  static Value floating(double d) { return Value(Kind::kFloat, d); }
  // UTF-8 text (lone surrogates in their 3-byte form, see the file comment). dumps() writes
  // any byte that is not valid UTF-8 as Python's surrogateescape would (U+DC80 + byte).
  static Value str(std::string utf8) { return Value(Kind::kStr, std::move(utf8)); }
  static Value bytes(std::string raw) { return Value(Kind::kBytes, std::move(raw)); }
  static Value list(List items = {}) { return Value(Kind::kList, std::move(items)); }
  static Value tuple(List items = {}) { return Value(Kind::kTuple, std::move(items)); }
  // Keys should be hashable (not list/dict) and distinct; dumps() writes entries as given.
  static Value dict(Dict entries = {}) { return Value(Kind::kDict, std::move(entries)); }

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_str() const { return kind_ == Kind::kStr; }
  bool is_bytes() const { return kind_ == Kind::kBytes; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  // Each REQUIRES the matching kind; a mismatch is a programming error (fatal, APUS_CHECK).
  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;
  const std::string& as_str() const;    // REQUIRES is_str()
  const std::string& as_bytes() const;  // REQUIRES is_bytes()
  // The UTF-8 of a str or the raw bytes of a bytes. REQUIRES is_str() || is_bytes().
  const std::string& as_string() const;
  const List& as_list() const;  // REQUIRES is_list() || is_tuple()
  List& as_list();
  const Dict& as_dict() const;  // REQUIRES is_dict()
  Dict& as_dict();

  // In a dict, the value of the first entry whose key is a str or a bytes equal to `key`;
  // nullptr when there is none or this is not a dict. Linear in the number of entries.
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  // Sets dict[key] = value as Python would: an existing equal key (Python equality, so 1,
  // 1.0 and True are one key) keeps its place and gets the new value; otherwise it is appended.
  // REQUIRES is_dict().
  void set(Value key, Value value);

  // Structural equality: same kind (so True != 1 and [1] != (1,)), same contents, dict entries
  // in the same order. Floats compare with ==.
  friend bool operator==(const Value& a, const Value& b);

  // A Python-like repr for logs and test messages (non-ASCII is always escaped).
  std::string debug_string() const;

 private:
  template <class T>
  Value(Kind kind, T v) : kind_(kind), v_(std::move(v)) {}

  Kind kind_ = Kind::kNone;
  std::variant<std::monostate, bool, int64_t, double, std::string, List, Dict> v_;
};

// Parses one pickle. Reads every opcode of protocols 0-2 that plain data uses (swift-protocol.md
// §8) plus the protocol 3-4 ones Python 3 writes for them (BINBYTES, SHORT_BINBYTES, BINBYTES8,
// SHORT_BINUNICODE, BINUNICODE8, MEMOIZE, FRAME, STACK_GLOBAL). Python 2 strings (STRING,
// BINSTRING, SHORT_BINSTRING) load as bytes, as Python 3 does with encoding='bytes'.
//
// The only globals, always called through REDUCE (BUILD only with an empty state):
//   _codecs.encode(str, 'latin1')          -> bytes (Python 3's protocol 0-2 form of bytes)
//   __builtin__.bytes() / builtins.bytes(b) -> bytes
//   __builtin__.dict() / builtins.dict(d)   -> dict (a shallow copy of d)
//   copy_reg._reconstructor / copyreg._reconstructor(cls, dict, state), with cls one of
//     swift.common.header_key_dict.HeaderKeyDict or dict -> a plain dict copy of state
//     (how Python pickles the HeaderKeyDict in async_pending at protocol 0)
// Anything else (other globals or calls, objects, sets, persistent ids, extensions, ints
// outside int64, unhashable dict keys, recursive structures) and any malformed or truncated
// input fail with Corruption and a message naming the problem and its offset. Duplicate dict
// keys behave as in Python (first position, last value). As in Python, bytes after STOP are
// ignored.
//
// Bounds: nesting deeper than kMaxDepth fails, and so does a pickle whose shared references
// (memo GETs) would expand it beyond kMaxExpansion times its size (plus 64 KiB), so work and
// memory stay linear in data.size(). Allocations never exceed what the input can justify.
inline constexpr int kMaxDepth = 100;     // Swift's pickles nest at most 4 deep
inline constexpr int kMaxExpansion = 16;  // legitimate pickles expand at most about 2x
Result<Value> loads(std::string_view data);

// Python's repr() of a float: the shortest digits that read back exactly, positional for
// decimal exponents in [-4, 16) with ".0" on integral values, else d.ddde±XX; "nan", "inf".
// Pickle protocol 0 and json.dumps (ring files) both write floats this way.
std::string python_float_repr(double d);

// Writes `v` as Python 3.11's pickle.dumps(v, protocol) would (the C pickler, which memoizes
// every str, bytes, tuple, list and dict), so for values built afresh the output is
// byte-identical to Python's. CPython's memo works by object identity: this codec shares
// only what CPython always shares ('' and one-character strs below U+0100, b'' and one-byte
// bytes, and the pieces of its bytes encoding), so Python output that reused some other object
// twice differs here but loads to the same value. bytes use Python 3's protocol-0-2 form (_codecs.encode of the
// latin-1 text, `bytes()` when empty), which Python 3 loads as bytes.
// REQUIRES: protocol is 0, 1 or 2 (others are a programming error; fatal).
std::string dumps(const Value& v, int protocol);

// Object metadata (the `user.swift.metadata*` xattrs, swift-protocol.md §7.5 and §8) as
// (key, value) pairs of WIRE bytes, i.e. the bytes of the HTTP header name and value.
//
// The encoding rule. Swift on Python 3 holds header-derived strings as "WSGI strings" (one
// code point per wire byte) and stores each key and value as the bytes utf8(that string); it
// pickles them at protocol 2, where Python 3 writes bytes through `_codecs.encode`. The one
// exception is the value of `name` ("/a/c/o"), which is real Unicode, so its stored bytes are
// its UTF-8, which is also its wire form. Python 2 Swift stored wire bytes as plain strings
// (BINSTRING/SHORT_BINSTRING). So:
//   read, Python 3 pickle (bytes built by _codecs.encode/bytes()/BINBYTES):
//       wire = latin1_encode(utf8_decode(stored)) for every key and value, except the value
//       of `name`, which is returned as stored. A stored item that does not decode to code
//       points <= U+00FF (not a WSGI string) is returned as stored.
//   read, Python 2 pickle: wire = stored.
//   read, str items (BINUNICODE; not written by Swift): wire = latin1_encode(str), or for
//       `name` (or text with code points > U+00FF) its UTF-8 with surrogateescape undone.
//   read, int/float/bool values become their Python str(); anything else is Corruption.
//   write: exactly what Swift 2.30.1's diskfile.write_metadata writes for the same pairs in
//       the same order (byte for byte; so its read_metadata decodes both the same).
// REQUIRES for encode: keys are distinct; `name`'s value is the UTF-8 object path.
// The wire bytes of a WSGI string held as UTF-8 text (one code point per byte), or nullopt
// when a code point is above U+00FF or the text is not UTF-8. Header values that travel inside
// JSON (Swift's MIME PUT footers) come out of the JSON parser as such text.
std::optional<std::string> wsgi_bytes(std::string_view utf8_text);

Result<std::vector<std::pair<std::string, std::string>>> decode_object_metadata(
    std::string_view pickle_bytes);
std::string encode_object_metadata(
    const std::vector<std::pair<std::string, std::string>>& wire_metadata);

namespace internal {
// decode_object_metadata()'s two readers, apart for the fuzz target that checks they agree.
// The plain one reads only the pickles Swift (Python 2 and 3) and Apus write for metadata whose
// keys and values are ASCII and distinct, at most 64 of them: a dict of strs or bytes (bytes
// as _codecs.encode(str, 'latin1'), bytes() or a counted string), memo numbered in order.
// It returns nullopt for anything else, valid or not. It builds no Value tree: 1.2 against
// 6.0 us for eight pairs, on every open of an object. The general one is loads() and the
// rules above.
std::optional<std::vector<std::pair<std::string, std::string>>> decode_plain_object_metadata(
    std::string_view pickle_bytes);
Result<std::vector<std::pair<std::string, std::string>>> decode_general_object_metadata(
    std::string_view pickle_bytes);
}  // namespace internal

}  // namespace apus::common::pickle
