#include "common/pickle.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include <boost/container/small_vector.hpp>

namespace apus::common::pickle {
namespace {

// Work allowed for any input, however small, on top of kMaxExpansion per input byte: enough
// for every pickle Swift writes to expand several times over.
constexpr int64_t kExpansionSlack = 64 * 1024;
// CPython's pickler writes list and dict items in batches of this many (MARK ... APPENDS).
constexpr size_t kBatchSize = 1000;

// ---------------------------------------------------------------------------- text helpers

constexpr uint32_t kBadCodePoint = 0xFFFFFFFF;

// Decodes the code point at s[i] and advances i, from UTF-8 as Python's 'surrogatepass'
// handler accepts it (surrogates allowed; overlong forms, > U+10FFFF and truncation are not).
// kBadCodePoint, with i unchanged, otherwise.
uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  size_t n;
  uint32_t cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 1, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 2, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 3, cp = b0 & 0x07, min = 0x10000;
  } else {
    return kBadCodePoint;
  }
  if (s.size() - i <= n) return kBadCodePoint;
  for (size_t k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return kBadCodePoint;
    cp = cp << 6 | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF) return kBadCodePoint;
  i += n + 1;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// An optionally signed decimal with no leading zeros (CPython would read those as octal, and no
// pickler writes them), as INT and LONG carry it.
enum class Decimal { kOk, kBad, kOutOfRange };
Decimal parse_decimal(std::string_view s, int64_t* v) {
  std::string_view digits = s;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return Decimal::kBad;
  for (char c : digits) {
    if (c < '0' || c > '9') return Decimal::kBad;
  }
  const char* begin = s[0] == '+' ? s.data() + 1 : s.data();
  const auto r = std::from_chars(begin, s.data() + s.size(), *v);
  return r.ec == std::errc() ? Decimal::kOk : Decimal::kOutOfRange;
}

bool is_text(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (next_code_point(s, i) == kBadCodePoint) return false;
  }
  return true;
}

// `s` as a Python str can hold it: bytes that are not part of valid UTF-8 become U+DC80 + byte,
// as Python's decode(..., 'surrogateescape') would make them.
std::string to_text(std::string_view s) {
  if (is_text(s)) return std::string(s);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = next_code_point(s, i);
    if (cp == kBadCodePoint) {
      append_utf8(out, 0xDC00 + static_cast<unsigned char>(s[i++]));
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  return out;
}

std::string latin1_to_utf8(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (char c : raw) append_utf8(out, static_cast<unsigned char>(c));
  return out;
}

// latin1_encode(text), or nullopt when a code point is above U+00FF (or text is not UTF-8).
std::optional<std::string> utf8_to_latin1(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const uint32_t cp = next_code_point(text, i);
    if (cp > 0xFF) return std::nullopt;
    out += static_cast<char>(cp);
  }
  return out;
}

// text.encode('utf-8', 'surrogateescape') for a str held as in Value: U+DC80..U+DCFF become
// the bytes 0x80..0xFF; everything else stays as it is.
std::string undo_surrogateescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const uint32_t cp = next_code_point(text, i);
    if (cp == kBadCodePoint) {
      out += text[i++];
    } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
      out += static_cast<char>(cp - 0xDC00);
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}


// Python's str(v) for the scalar kinds object metadata may hold.
std::optional<std::string> python_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return python_float_repr(v.as_float());
    default:
      return std::nullopt;
  }
}

// ---------------------------------------------------------------------------- dict keys

bool is_numeric(const Value& v) { return v.is_bool() || v.is_int() || v.is_float(); }

// A numeric key as a long double, which holds every int64 and every double exactly.
long double numeric(const Value& v) {
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_int()) return static_cast<long double>(v.as_int());
  return v.as_float();
}

bool hashable(const Value& v) {
  if (v.is_list() || v.is_dict()) return false;
  if (v.is_tuple()) {
    for (const Value& item : v.as_list()) {
      if (!hashable(item)) return false;
    }
  }
  return true;
}

// Python's == on hashable values: 1, 1.0 and True are equal; str never equals bytes; NaN
// equals nothing.
bool key_equal(const Value& a, const Value& b) {
  if (is_numeric(a) || is_numeric(b)) {
    if (!is_numeric(a) || !is_numeric(b)) return false;
    if ((a.is_float() && std::isnan(a.as_float())) || (b.is_float() && std::isnan(b.as_float())))
      return false;
    return numeric(a) == numeric(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kStr:
    case Value::Kind::kBytes:
      return a.as_string() == b.as_string();
    case Value::Kind::kTuple: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!key_equal(x[i], y[i])) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

// A strict weak order on hashable values whose equivalence classes are key_equal (except that
// all NaNs are equivalent here but never key_equal), so duplicates can be found by sorting.
int key_rank(const Value& v) {
  if (v.is_none()) return 0;
  if (is_numeric(v)) return v.is_float() && std::isnan(v.as_float()) ? 2 : 1;
  if (v.is_str()) return 3;
  if (v.is_bytes()) return 4;
  return 5;  // tuple
}

// Three-way form of the order: <0, 0 or >0. Each element pair of two tuples is compared once;
// a two-way less (lexicographical_compare over key_less asks both a<b and b<a per element)
// doubles the work at each level of nesting, and a few dozen nested tuples in a dict key made
// that take minutes (found by the pickle fuzzer).
int key_compare(const Value& a, const Value& b) {
  const int ra = key_rank(a), rb = key_rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 1: {
      const long double x = numeric(a), y = numeric(b);
      return x < y ? -1 : (y < x ? 1 : 0);
    }
    case 3:
    case 4:
      return a.as_string().compare(b.as_string());
    case 5: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (int c = key_compare(x[i], y[i]); c != 0) return c;
      }
      return x.size() < y.size() ? -1 : (y.size() < x.size() ? 1 : 0);
    }
    default:
      return 0;
  }
}

bool key_less(const Value& a, const Value& b) { return key_compare(a, b) < 0; }

// Makes `entries` what a Python dict built by inserting them in order holds: a repeated key
// keeps its first position and takes its last value. O(n log n), whatever the keys.
void merge_duplicate_keys(Value::Dict& entries) {
  if (entries.size() < 2) return;
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return key_less(entries[x].first, entries[y].first);
  });
  std::vector<bool> drop(entries.size(), false);
  bool any = false;
  for (size_t run = 0; run < order.size();) {
    size_t end = run + 1;
    while (end < order.size() && !key_less(entries[order[run]].first, entries[order[end]].first))
      ++end;
    const size_t head = order[run];  // the smallest index: stable sort
    for (size_t k = run + 1; k < end; ++k) {
      const size_t dup = order[k];
      if (!key_equal(entries[head].first, entries[dup].first)) continue;  // NaNs
      entries[head].second = std::move(entries[dup].second);              // later wins
      drop[dup] = any = true;
    }
    run = end;
  }
  if (!any) return;
  Value::Dict kept;
  kept.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(entries[i]));
  }
  entries = std::move(kept);
}

// ---------------------------------------------------------------------------- reading

const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x81:
      return "NEWOBJ";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8F:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

enum class Global : uint8_t { kCodecsEncode, kReconstructor, kHeaderKeyDict, kDict, kBytes };

std::optional<Global> allowed_global(std::string_view module, std::string_view name) {
  if (module == "_codecs" && name == "encode") return Global::kCodecsEncode;
  if ((module == "copy_reg" || module == "copyreg") && name == "_reconstructor")
    return Global::kReconstructor;
  if (module == "swift.common.header_key_dict" && name == "HeaderKeyDict")
    return Global::kHeaderKeyDict;
  if (module == "__builtin__" || module == "builtins") {
    if (name == "dict") return Global::kDict;
    if (name == "bytes") return Global::kBytes;
  }
  return std::nullopt;
}

bool is_latin1_codec(std::string_view name) {
  std::string n;
  for (char c : name) {
    n += (c == '-' || c == ' ') ? '_'
                                : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return n == "latin1" || n == "latin_1" || n == "iso8859_1" || n == "iso_8859_1" || n == "l1";
}

// The next `n` bytes of `in` at `pos`, which moves past them; false when fewer are left.
bool take_bytes(std::string_view in, size_t& pos, size_t n, std::string_view* out) {
  if (in.size() - pos < n) return false;
  *out = in.substr(pos, n);
  pos += n;
  return true;
}

// An `n`-byte little-endian number, taken as take_bytes() takes bytes.
bool take_le_number(std::string_view in, size_t& pos, size_t n, uint64_t* v) {
  std::string_view b;
  if (!take_bytes(in, pos, n, &b)) return false;
  *v = 0;
  for (size_t i = n; i-- > 0;) *v = *v << 8 | static_cast<unsigned char>(b[i]);
  return true;
}

// A Python object under construction. Containers refer to their items by pointer, because
// pickles mutate containers after memoizing them and may reference one object many times.
struct Node {
  enum class Type : uint8_t { kScalar, kList, kTuple, kDict, kGlobal };
  Type type = Type::kScalar;
  Value scalar;                                  // kScalar
  std::vector<Node*> items;                      // kList, kTuple
  std::vector<std::pair<Node*, Node*>> entries;  // kDict
  Global global = Global::kDict;                 // kGlobal
  bool converting = false;                       // inside to_value(): a cycle if seen again
};

// One loads() call. Thread-compatible; used once.
class Parser {
 public:
  explicit Parser(std::string_view in)
      : in_(in), budget_(kMaxExpansion * static_cast<int64_t>(in.size()) + kExpansionSlack) {}

  Result<Value> run() {
    for (;;) {
      at_ = pos_;
      if (pos_ >= in_.size()) return corrupt("truncated (no STOP)");
      const auto op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') {
        Node* top = nullptr;
        APUS_RETURN_IF_ERROR(pop(&top));
        Value out;
        APUS_RETURN_IF_ERROR(to_value(top, 0, &out));
        return out;
      }
      APUS_RETURN_IF_ERROR(step(op));
    }
  }

  // Whether any bytes were built the way only Python 3 writes them.
  bool saw_py3_bytes() const { return py3_bytes_; }

 private:
  Status corrupt(std::string_view what) const {
    return Status::corruption("pickle: " + std::string(what) + " at offset " + std::to_string(at_));
  }
  Status truncated() const { return corrupt("truncated"); }

  // Every node and every byte of text built counts against the budget, so shared references
  // cannot make work or memory grow faster than the input.
  Status charge(uint64_t units) {
    budget_ -= static_cast<int64_t>(std::min<uint64_t>(units, uint64_t{1} << 62));
    if (budget_ < 0) return corrupt("expands too much (shared references)");
    return Status();
  }

  // ---- input
  bool take(size_t n, std::string_view* out) { return take_bytes(in_, pos_, n, out); }
  bool take_le(size_t n, uint64_t* v) { return take_le_number(in_, pos_, n, v); }
  bool take_line(std::string_view* line) {
    const size_t nl = in_.find('\n', pos_);
    if (nl == std::string_view::npos) return false;
    *line = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return true;
  }
  // A byte string whose length is an n-byte little-endian prefix.
  Status take_counted(size_t n, bool is_signed, std::string_view* out) {
    uint64_t len = 0;
    if (!take_le(n, &len)) return truncated();
    if (is_signed && n == 4 && (len & 0x80000000u)) return corrupt("negative length");
    if (len > in_.size() - pos_) return truncated();
    take(static_cast<size_t>(len), out);
    return Status();
  }

  // ---- stack
  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  Status pop(Node** out) {
    if (stack_.size() <= fence()) return corrupt("stack underflow");
    *out = stack_.back();
    stack_.pop_back();
    return Status();
  }
  Status top(Node** out) {
    if (stack_.size() <= fence()) return corrupt("stack underflow");
    *out = stack_.back();
    return Status();
  }
  Status pop_mark(size_t* mark) {
    if (marks_.empty()) return corrupt("no MARK");
    *mark = marks_.back();
    marks_.pop_back();
    return Status();
  }
  // The container just below a mark that was popped (APPENDS, SETITEMS).
  Status below_mark(size_t mark, Node** out) {
    if (mark <= fence()) return corrupt("stack underflow");
    *out = stack_[mark - 1];
    return Status();
  }

  Node* make(Node::Type type) {
    arena_.emplace_back();
    arena_.back().type = type;
    return &arena_.back();
  }
  Status push_value(Value v) {
    APUS_RETURN_IF_ERROR(charge(1 + (v.is_str() || v.is_bytes() ? v.as_string().size() : 0)));
    Node* n = make(Node::Type::kScalar);
    n->scalar = std::move(v);
    stack_.push_back(n);
    return Status();
  }
  Status push_container(Node::Type type, std::vector<Node*> items = {}) {
    APUS_RETURN_IF_ERROR(charge(1));
    Node* n = make(type);
    n->items = std::move(items);
    stack_.push_back(n);
    return Status();
  }
  // The items above `mark`, removed from the stack.
  std::vector<Node*> take_items(size_t mark) {
    std::vector<Node*> items(stack_.begin() + static_cast<ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  // ---- memo
  Status memo_put(uint64_t idx) {
    Node* n = nullptr;
    APUS_RETURN_IF_ERROR(top(&n));
    memo_[idx] = n;
    return Status();
  }
  Status memo_get(uint64_t idx) {
    const auto it = memo_.find(idx);
    if (it == memo_.end()) return corrupt("memo entry " + std::to_string(idx) + " not found");
    stack_.push_back(it->second);
    return Status();
  }
  Status decimal_arg(uint64_t* idx) {
    std::string_view line;
    if (!take_line(&line)) return truncated();
    const auto r = std::from_chars(line.data(), line.data() + line.size(), *idx);
    if (line.empty() || r.ec != std::errc() || r.ptr != line.data() + line.size())
      return corrupt("bad memo index");
    return Status();
  }

  Status step(uint8_t op);
  Status load_int_line();
  Status load_long_line();
  Status load_float_line();
  Status load_long_bytes(std::string_view le);
  Status load_string_line();
  Status load_unicode_line();
  Status load_text(std::string_view utf8);
  Status load_global(std::string_view module, std::string_view name);
  Status reduce();
  Status copy_dict(Node* from);

  Status to_value(Node* n, int depth, Value* out);

  std::string_view in_;
  size_t pos_ = 0;
  size_t at_ = 0;  // offset of the opcode being run, for messages
  int64_t budget_;
  bool py3_bytes_ = false;
  std::deque<Node> arena_;  // owns every node; deque keeps addresses stable
  std::vector<Node*> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, Node*> memo_;
};

Status Parser::step(uint8_t op) {
  uint64_t n = 0;
  std::string_view s;
  switch (op) {
    case 0x80:  // PROTO
      if (!take_le(1, &n)) return truncated();
      if (n > 5) return corrupt("unsupported protocol " + std::to_string(n));
      return Status();
    case 0x95:  // FRAME: only a length; the data must be there
      if (!take_le(8, &n)) return truncated();
      if (n > in_.size() - pos_) return truncated();
      return Status();
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return Status();
    case ')':  // EMPTY_TUPLE
      return push_container(Node::Type::kTuple);
    case ']':  // EMPTY_LIST
      return push_container(Node::Type::kList);
    case '}':  // EMPTY_DICT
      return push_container(Node::Type::kDict);
    case 'N':  // NONE
      return push_value(Value::none());
    case 0x88:  // NEWTRUE
      return push_value(Value::boolean(true));
    case 0x89:  // NEWFALSE
      return push_value(Value::boolean(false));
    case 'I':  // INT
      return load_int_line();
    case 'J':  // BININT
      if (!take_le(4, &n)) return truncated();
      return push_value(Value::integer(static_cast<int32_t>(static_cast<uint32_t>(n))));
    case 'K':  // BININT1
      if (!take_le(1, &n)) return truncated();
      return push_value(Value::integer(static_cast<int64_t>(n)));
    case 'M':  // BININT2
      if (!take_le(2, &n)) return truncated();
      return push_value(Value::integer(static_cast<int64_t>(n)));
    case 'L':  // LONG
      return load_long_line();
    case 0x8A:  // LONG1
      APUS_RETURN_IF_ERROR(take_counted(1, false, &s));
      return load_long_bytes(s);
    case 0x8B:  // LONG4
      APUS_RETURN_IF_ERROR(take_counted(4, true, &s));
      return load_long_bytes(s);
    case 'F':  // FLOAT
      return load_float_line();
    case 'G':  // BINFLOAT: big-endian IEEE 754
      if (!take(8, &s)) return truncated();
      for (char c : s) n = n << 8 | static_cast<unsigned char>(c);
      return push_value(Value::floating(std::bit_cast<double>(n)));
    case 'S':  // STRING
      return load_string_line();
    case 'T':  // BINSTRING
      APUS_RETURN_IF_ERROR(take_counted(4, true, &s));
      return push_value(Value::bytes(std::string(s)));
    case 'U':  // SHORT_BINSTRING
      APUS_RETURN_IF_ERROR(take_counted(1, false, &s));
      return push_value(Value::bytes(std::string(s)));
    case 'V':  // UNICODE
      return load_unicode_line();
    case 'X':  // BINUNICODE
      APUS_RETURN_IF_ERROR(take_counted(4, false, &s));
      return load_text(s);
    case 0x8C:  // SHORT_BINUNICODE
      APUS_RETURN_IF_ERROR(take_counted(1, false, &s));
      return load_text(s);
    case 0x8D:  // BINUNICODE8
      APUS_RETURN_IF_ERROR(take_counted(8, false, &s));
      return load_text(s);
    case 'B':   // BINBYTES
    case 'C':   // SHORT_BINBYTES
    case 0x8E:  // BINBYTES8
      APUS_RETURN_IF_ERROR(take_counted(op == 'B' ? 4 : op == 'C' ? 1 : 8, false, &s));
      py3_bytes_ = true;
      return push_value(Value::bytes(std::string(s)));
    case 'a': {  // APPEND
      Node *item = nullptr, *list = nullptr;
      APUS_RETURN_IF_ERROR(pop(&item));
      APUS_RETURN_IF_ERROR(top(&list));
      if (list->type != Node::Type::kList) return corrupt("APPEND to a non-list");
      APUS_RETURN_IF_ERROR(charge(1));
      list->items.push_back(item);
      return Status();
    }
    case 'e': {  // APPENDS
      size_t mark = 0;
      Node* list = nullptr;
      APUS_RETURN_IF_ERROR(pop_mark(&mark));
      APUS_RETURN_IF_ERROR(below_mark(mark, &list));
      if (list->type != Node::Type::kList) return corrupt("APPENDS to a non-list");
      std::vector<Node*> items = take_items(mark);
      APUS_RETURN_IF_ERROR(charge(items.size()));
      list->items.insert(list->items.end(), items.begin(), items.end());
      return Status();
    }
    case 'l':    // LIST
    case 't': {  // TUPLE
      size_t mark = 0;
      APUS_RETURN_IF_ERROR(pop_mark(&mark));
      return push_container(op == 'l' ? Node::Type::kList : Node::Type::kTuple, take_items(mark));
    }
    case 0x85:    // TUPLE1
    case 0x86:    // TUPLE2
    case 0x87: {  // TUPLE3
      const size_t count = op - 0x84u;
      if (stack_.size() < fence() + count) return corrupt("stack underflow");
      return push_container(Node::Type::kTuple, take_items(stack_.size() - count));
    }
    case 'd':    // DICT
    case 's':    // SETITEM
    case 'u': {  // SETITEMS
      size_t first = 0;
      Node* dict = nullptr;
      if (op == 's') {
        if (stack_.size() < fence() + 3) return corrupt("stack underflow");
        first = stack_.size() - 2;
        dict = stack_[first - 1];
      } else {
        APUS_RETURN_IF_ERROR(pop_mark(&first));
        if (op == 'u') APUS_RETURN_IF_ERROR(below_mark(first, &dict));
      }
      if ((stack_.size() - first) % 2 != 0) return corrupt("odd number of items for a dict");
      if (op == 'd') {
        APUS_RETURN_IF_ERROR(charge(1));
        dict = make(Node::Type::kDict);
      } else if (dict->type != Node::Type::kDict) {
        return corrupt("SETITEM on a non-dict");
      }
      std::vector<Node*> items = take_items(first);
      APUS_RETURN_IF_ERROR(charge(items.size()));
      for (size_t i = 0; i < items.size(); i += 2)
        dict->entries.emplace_back(items[i], items[i + 1]);
      if (op == 'd') stack_.push_back(dict);
      return Status();
    }
    case 'p':  // PUT
      APUS_RETURN_IF_ERROR(decimal_arg(&n));
      return memo_put(n);
    case 'q':  // BINPUT
      if (!take_le(1, &n)) return truncated();
      return memo_put(n);
    case 'r':  // LONG_BINPUT
      if (!take_le(4, &n)) return truncated();
      return memo_put(n);
    case 0x94:  // MEMOIZE
      return memo_put(memo_.size());
    case 'g':  // GET
      APUS_RETURN_IF_ERROR(decimal_arg(&n));
      return memo_get(n);
    case 'h':  // BINGET
      if (!take_le(1, &n)) return truncated();
      return memo_get(n);
    case 'j':  // LONG_BINGET
      if (!take_le(4, &n)) return truncated();
      return memo_get(n);
    case 'c': {  // GLOBAL
      std::string_view module, name;
      if (!take_line(&module) || !take_line(&name)) return truncated();
      return load_global(module, name);
    }
    case 0x93: {  // STACK_GLOBAL
      Node *name = nullptr, *module = nullptr;
      APUS_RETURN_IF_ERROR(pop(&name));
      APUS_RETURN_IF_ERROR(pop(&module));
      if (name->type != Node::Type::kScalar || !name->scalar.is_str() ||
          module->type != Node::Type::kScalar || !module->scalar.is_str())
        return corrupt("STACK_GLOBAL needs two strs");
      return load_global(module->scalar.as_str(), name->scalar.as_str());
    }
    case 'R':  // REDUCE
      return reduce();
    case 'b': {  // BUILD: Python sets no state for an empty one; Swift never writes others
      Node *state = nullptr, *target = nullptr;
      APUS_RETURN_IF_ERROR(pop(&state));
      APUS_RETURN_IF_ERROR(top(&target));
      const bool empty = (state->type == Node::Type::kScalar && state->scalar.is_none()) ||
                         (state->type == Node::Type::kDict && state->entries.empty());
      if (!empty) return corrupt("BUILD with object state is not supported");
      return Status();
    }
    case '0':  // POP: the top item, or an open MARK right at the top
      if (!marks_.empty() && marks_.back() == stack_.size()) {
        marks_.pop_back();
        return Status();
      }
      if (stack_.size() <= fence()) return corrupt("stack underflow");
      stack_.pop_back();
      return Status();
    case '1': {  // POP_MARK
      size_t mark = 0;
      APUS_RETURN_IF_ERROR(pop_mark(&mark));
      stack_.resize(mark);
      return Status();
    }
    case '2': {  // DUP
      Node* n2 = nullptr;
      APUS_RETURN_IF_ERROR(top(&n2));
      stack_.push_back(n2);
      return Status();
    }
    default:
      break;
  }
  if (const char* name = opcode_name(op)) {
    return corrupt(std::string("opcode ") + name + " is not supported (not plain data)");
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  return corrupt(std::string("unknown opcode ") + hex);
}

Status Parser::load_int_line() {
  std::string_view line;
  if (!take_line(&line)) return truncated();
  // Python 2 wrote booleans as "I01" / "I00"; CPython takes any two-character 0 or 1 as one.
  if (line == "01" || line == "00") return push_value(Value::boolean(line == "01"));
  int64_t v = 0;
  switch (parse_decimal(line, &v)) {
    case Decimal::kOk:
      if (line.size() == 2 && (v == 0 || v == 1)) return push_value(Value::boolean(v == 1));
      return push_value(Value::integer(v));
    case Decimal::kBad:
      return corrupt("bad INT");
    case Decimal::kOutOfRange:
      break;
  }
  return corrupt("INT out of int64 range");
}

Status Parser::load_long_line() {
  std::string_view line;
  if (!take_line(&line)) return truncated();
  if (!line.empty() && line.back() == 'L') line.remove_suffix(1);
  int64_t v = 0;
  switch (parse_decimal(line, &v)) {
    case Decimal::kOk:
      return push_value(Value::integer(v));
    case Decimal::kBad:
      return corrupt("bad LONG");
    case Decimal::kOutOfRange:
      break;
  }
  return corrupt("LONG out of int64 range");
}

// Little-endian two's complement, as LONG1/LONG4 carry it; only int64 values are accepted.
Status Parser::load_long_bytes(std::string_view le) {
  if (le.empty()) return push_value(Value::integer(0));
  const bool negative = static_cast<unsigned char>(le.back()) & 0x80;
  const unsigned char fill = negative ? 0xFF : 0x00;
  size_t n = le.size();
  // Redundant sign bytes above 8 are fine as long as byte 7 carries the same sign.
  while (n > 8 && static_cast<unsigned char>(le[n - 1]) == fill) --n;
  if (n > 8 ||
      (n == 8 && le.size() > 8 && (static_cast<unsigned char>(le[7]) & 0x80) != (fill & 0x80))) {
    return corrupt("LONG out of int64 range");
  }
  uint64_t u = negative ? ~uint64_t{0} : 0;
  for (size_t i = 0; i < n; ++i) {
    u &= ~(uint64_t{0xFF} << (8 * i));
    u |= uint64_t{static_cast<unsigned char>(le[i])} << (8 * i);
  }
  return push_value(Value::integer(static_cast<int64_t>(u)));
}

Status Parser::load_float_line() {
  std::string_view line;
  if (!take_line(&line)) return truncated();
  const char* begin = line.data();
  if (!line.empty() && line[0] == '+') ++begin;
  double d = 0;
  const auto r = std::from_chars(begin, line.data() + line.size(), d);
  // from_chars also takes "nan(...)", and after a skipped '+' a second sign; Python takes neither.
  if (line.empty() || r.ptr != line.data() + line.size() ||
      line.find('(') != std::string_view::npos ||
      (begin != line.data() && (*begin == '-' || *begin == '+')))
    return corrupt("bad FLOAT");
  if (r.ec != std::errc()) return corrupt("FLOAT out of double range");
  return push_value(Value::floating(d));
}

// STRING: a Python 2 str repr, quoted and backslash-escaped (PyBytes_DecodeEscape).
Status Parser::load_string_line() {
  std::string_view line;
  if (!take_line(&line)) return truncated();
  if (line.size() < 2 || line.front() != line.back() || (line[0] != '\'' && line[0] != '"'))
    return corrupt("STRING argument must be quoted");
  const std::string_view s = line.substr(1, line.size() - 2);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i++];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i >= s.size()) return corrupt("STRING ends in a backslash");
    const char e = s[i++];
    switch (e) {
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x': {
        if (s.size() - i < 2 || hex_digit(s[i]) < 0 || hex_digit(s[i + 1]) < 0)
          return corrupt("bad \\x escape in STRING");
        out += static_cast<char>(hex_digit(s[i]) << 4 | hex_digit(s[i + 1]));
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0';
          for (int k = 0; k < 2 && i < s.size() && s[i] >= '0' && s[i] <= '7'; ++k)
            v = v * 8 + (s[i++] - '0');
          out += static_cast<char>(v & 0xFF);
        } else {  // Python keeps an unknown escape as it is
          out += '\\';
          out += e;
        }
    }
  }
  return push_value(Value::bytes(std::move(out)));
}

// UNICODE: raw-unicode-escape. Bytes are code points U+0000..U+00FF, except that the last of
// an odd run of backslashes followed by u/U starts a \uXXXX / \UXXXXXXXX escape.
Status Parser::load_unicode_line() {
  std::string_view line;
  if (!take_line(&line)) return truncated();
  std::string out;
  size_t backslashes = 0;
  for (size_t i = 0; i < line.size();) {
    const auto c = static_cast<unsigned char>(line[i++]);
    if (c == '\\') {
      ++backslashes;
      out += '\\';
      continue;
    }
    const bool escape = (c == 'u' || c == 'U') && backslashes % 2 == 1;
    backslashes = 0;
    if (!escape) {
      append_utf8(out, c);
      continue;
    }
    out.pop_back();  // the backslash that starts the escape
    const size_t count = c == 'u' ? 4 : 8;
    if (line.size() - i < count) return corrupt("truncated \\u escape in UNICODE");
    uint32_t cp = 0;
    for (size_t k = 0; k < count; ++k) {
      const int d = hex_digit(line[i + k]);
      if (d < 0) return corrupt("bad \\u escape in UNICODE");
      cp = cp << 4 | static_cast<uint32_t>(d);
    }
    i += count;
    if (cp > 0x10FFFF) return corrupt("\\U escape out of range in UNICODE");
    append_utf8(out, cp);
  }
  return push_value(Value::str(std::move(out)));
}

Status Parser::load_text(std::string_view utf8) {
  if (!is_text(utf8)) return corrupt("str is not valid UTF-8");
  return push_value(Value::str(std::string(utf8)));
}

Status Parser::load_global(std::string_view module, std::string_view name) {
  const std::optional<Global> g = allowed_global(module, name);
  if (!g) {
    // Names can be anything; keep the message printable and short.
    std::string shown;
    for (char c : std::string(module) + "." + std::string(name)) {
      if (shown.size() >= 80) break;
      shown += (c >= 0x20 && c < 0x7F) ? c : '?';
    }
    return corrupt("global " + shown + " is not allowed");
  }
  APUS_RETURN_IF_ERROR(charge(1));
  Node* n = make(Node::Type::kGlobal);
  n->global = *g;
  stack_.push_back(n);
  return Status();
}

Status Parser::copy_dict(Node* from) {
  APUS_RETURN_IF_ERROR(charge(1 + from->entries.size()));
  Node* n = make(Node::Type::kDict);
  n->entries = from->entries;
  stack_.push_back(n);
  return Status();
}

Status Parser::reduce() {
  Node *args = nullptr, *callable = nullptr;
  APUS_RETURN_IF_ERROR(pop(&args));
  APUS_RETURN_IF_ERROR(pop(&callable));
  if (callable->type != Node::Type::kGlobal) return corrupt("REDUCE of a non-callable");
  if (args->type != Node::Type::kTuple) return corrupt("REDUCE arguments are not a tuple");
  const std::vector<Node*>& a = args->items;
  auto is_scalar = [](const Node* n, Value::Kind kind) {
    return n->type == Node::Type::kScalar && n->scalar.kind() == kind;
  };
  auto is_global = [](const Node* n, Global g) {
    return n->type == Node::Type::kGlobal && n->global == g;
  };
  switch (callable->global) {
    case Global::kCodecsEncode: {  // Python 3's bytes at protocols 0-2
      if (a.size() != 2 || !is_scalar(a[0], Value::Kind::kStr) ||
          !is_scalar(a[1], Value::Kind::kStr) || !is_latin1_codec(a[1]->scalar.as_str()))
        return corrupt("_codecs.encode needs (str, 'latin1')");
      std::optional<std::string> raw = utf8_to_latin1(a[0]->scalar.as_str());
      if (!raw) return corrupt("_codecs.encode of text that is not latin-1");
      py3_bytes_ = true;
      return push_value(Value::bytes(std::move(*raw)));
    }
    case Global::kBytes:
      if (a.empty()) {
        py3_bytes_ = true;
        return push_value(Value::bytes(""));
      }
      if (a.size() == 1 && is_scalar(a[0], Value::Kind::kBytes)) {
        py3_bytes_ = true;
        return push_value(a[0]->scalar);
      }
      return corrupt("bytes() needs no argument or one bytes");
    case Global::kDict:
      if (a.empty()) return push_container(Node::Type::kDict);
      if (a.size() == 1 && a[0]->type == Node::Type::kDict) return copy_dict(a[0]);
      return corrupt("dict() needs no argument or one dict");
    case Global::kReconstructor:
      // copyreg._reconstructor(cls, base, state) is base.__new__(cls) filled from state.
      if (a.size() == 3 &&
          (is_global(a[0], Global::kHeaderKeyDict) || is_global(a[0], Global::kDict)) &&
          is_global(a[1], Global::kDict) && a[2]->type == Node::Type::kDict)
        return copy_dict(a[2]);
      return corrupt("_reconstructor needs (HeaderKeyDict or dict, dict, a dict)");
    case Global::kHeaderKeyDict:
      break;
  }
  return corrupt("HeaderKeyDict may only be rebuilt through _reconstructor");
}

Status Parser::to_value(Node* n, int depth, Value* out) {
  if (depth > kMaxDepth) return corrupt("nested deeper than " + std::to_string(kMaxDepth));
  if (n->type == Node::Type::kScalar) {
    const Value& v = n->scalar;
    APUS_RETURN_IF_ERROR(charge(1 + (v.is_str() || v.is_bytes() ? v.as_string().size() : 0)));
    *out = v;
    return Status();
  }
  if (n->type == Node::Type::kGlobal) return corrupt("a global is not a value");
  if (n->converting) return corrupt("recursive structure");
  APUS_RETURN_IF_ERROR(charge(1));
  n->converting = true;
  Status st;
  if (n->type == Node::Type::kDict) {
    Value::Dict entries;
    entries.reserve(n->entries.size());
    for (const auto& [k, v] : n->entries) {
      Value key, value;
      st = to_value(k, depth + 1, &key);
      if (st.ok()) st = to_value(v, depth + 1, &value);
      if (st.ok() && !hashable(key)) st = corrupt("unhashable dict key");
      if (!st.ok()) break;
      entries.emplace_back(std::move(key), std::move(value));
    }
    merge_duplicate_keys(entries);
    *out = Value::dict(std::move(entries));
  } else {
    Value::List items;
    items.reserve(n->items.size());
    for (Node* item : n->items) {
      Value v;
      st = to_value(item, depth + 1, &v);
      if (!st.ok()) break;
      items.push_back(std::move(v));
    }
    *out = n->type == Node::Type::kList ? Value::list(std::move(items))
                                        : Value::tuple(std::move(items));
  }
  n->converting = false;
  return st;
}

// ---------------------------------------------------------------------------- writing

// Writes what CPython 3.11's C pickler writes. Its memo is by object identity; the objects it
// necessarily shares are modelled here (see dumps() in the header).
class Writer {
 public:
  explicit Writer(int protocol) : proto_(protocol) {}

  std::string run(const Value& v) {
    if (proto_ >= 2) {
      out_ += '\x80';
      out_ += static_cast<char>(proto_);
    }
    save(v);
    out_ += '.';
    return std::move(out_);
  }

 private:
  bool bin() const { return proto_ >= 1; }

  void put_le(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out_ += static_cast<char>(v >> (8 * i) & 0xFF);
  }

  uint32_t memoize() {
    const uint32_t idx = next_memo_++;
    if (!bin()) {
      out_ += 'p' + std::to_string(idx) + '\n';
    } else if (idx < 256) {
      out_ += 'q';
      put_le(idx, 1);
    } else {
      out_ += 'r';
      put_le(idx, 4);
    }
    return idx;
  }

  void get(uint32_t idx) {
    if (!bin()) {
      out_ += 'g' + std::to_string(idx) + '\n';
    } else if (idx < 256) {
      out_ += 'h';
      put_le(idx, 1);
    } else {
      out_ += 'j';
      put_le(idx, 4);
    }
  }

  void save(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_ += 'N';
        return;
      case Value::Kind::kBool:
        if (proto_ >= 2) {
          out_ += v.as_bool() ? '\x88' : '\x89';
        } else {
          out_ += v.as_bool() ? "I01\n" : "I00\n";
        }
        return;
      case Value::Kind::kInt:
        return save_int(v.as_int());
      case Value::Kind::kFloat:
        if (bin()) {
          out_ += 'G';
          const auto bits = std::bit_cast<uint64_t>(v.as_float());
          for (int i = 7; i >= 0; --i) out_ += static_cast<char>(bits >> (8 * i) & 0xFF);
        } else {
          out_ += 'F' + python_float_repr(v.as_float()) + '\n';
        }
        return;
      case Value::Kind::kStr:
        return save_str(to_text(v.as_str()));
      case Value::Kind::kBytes:
        return save_bytes(v.as_bytes());
      case Value::Kind::kList:
        return save_list(v.as_list());
      case Value::Kind::kTuple:
        return save_tuple(v.as_list());
      case Value::Kind::kDict:
        return save_dict(v.as_dict());
    }
  }

  void save_int(int64_t i) {
    if (i >= INT32_MIN && i <= INT32_MAX) {
      if (!bin()) {
        out_ += 'I' + std::to_string(i) + '\n';
      } else if (i >= 0 && i <= 0xFF) {
        out_ += 'K';
        put_le(static_cast<uint64_t>(i), 1);
      } else if (i >= 0 && i <= 0xFFFF) {
        out_ += 'M';
        put_le(static_cast<uint64_t>(i), 2);
      } else {
        out_ += 'J';
        put_le(static_cast<uint32_t>(static_cast<int32_t>(i)), 4);
      }
      return;
    }
    if (proto_ < 2) {
      out_ += 'L' + std::to_string(i) + "L\n";
      return;
    }
    // LONG1: the fewest little-endian two's complement bytes (CPython's sizing: one more byte
    // than the magnitude's whole bytes, dropped again when a negative number does not need it).
    const uint64_t mag = i < 0 ? uint64_t{0} - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    size_t nbytes = static_cast<size_t>(std::bit_width(mag) / 8 + 1);
    std::string b;
    for (size_t k = 0; k < nbytes; ++k) {
      b += static_cast<char>(k < 8 ? static_cast<uint64_t>(i) >> (8 * k) & 0xFF
                                   : (i < 0 ? 0xFF : 0x00));
    }
    if (i < 0 && nbytes > 1 && static_cast<unsigned char>(b[nbytes - 1]) == 0xFF &&
        (static_cast<unsigned char>(b[nbytes - 2]) & 0x80)) {
      b.pop_back();
      --nbytes;
    }
    out_ += '\x8a';
    out_ += static_cast<char>(nbytes);
    out_ += b;
  }

  // CPython keeps one object for '' and for each one-character str below U+0100.
  static bool shared_str(std::string_view text) {
    if (text.size() <= 1) return true;
    const auto b0 = static_cast<unsigned char>(text[0]);
    return text.size() == 2 && (b0 == 0xC2 || b0 == 0xC3);
  }

  void save_str(const std::string& text) {
    const bool shared = shared_str(text);
    if (shared) {
      if (const auto it = str_memo_.find(text); it != str_memo_.end()) return get(it->second);
    }
    if (bin()) {
      APUS_CHECK(text.size() <= UINT32_MAX);
      out_ += 'X';
      put_le(text.size(), 4);
      out_ += text;
    } else {
      // raw-unicode-escape, plus \u escapes for the characters that would break the line.
      out_ += 'V';
      for (size_t i = 0; i < text.size();) {
        const uint32_t cp = next_code_point(text, i);
        char buf[16];
        if (cp >= 0x10000) {
          std::snprintf(buf, sizeof buf, "\\U%08x", cp);
          out_ += buf;
        } else if (cp >= 0x100 || cp == '\\' || cp == 0 || cp == '\n' || cp == '\r' || cp == 0x1A) {
          std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          out_ += buf;
        } else {
          out_ += static_cast<char>(cp);
        }
      }
      out_ += '\n';
    }
    const uint32_t idx = memoize();
    if (shared) str_memo_.emplace(text, idx);
  }

  void save_global(std::optional<uint32_t>* slot, std::string_view module, std::string_view name) {
    if (*slot) return get(**slot);
    out_ += 'c';
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
    *slot = memoize();
  }

  // Python 3 below protocol 3: bytes() for b'', else _codecs.encode(<latin-1 text>, 'latin1').
  // CPython keeps one object for b'' and each one-byte bytes, and one for the 'latin1' text.
  void save_bytes(const std::string& raw) {
    const bool shared = raw.size() <= 1;
    if (shared) {
      if (const auto it = bytes_memo_.find(raw); it != bytes_memo_.end()) return get(it->second);
    }
    if (raw.empty()) {
      save_global(&bytes_global_, "__builtin__", "bytes");
      out_ += bin() ? ")" : "(t";
    } else {
      save_global(&encode_global_, "_codecs", "encode");
      if (proto_ < 2) out_ += '(';
      save_str(latin1_to_utf8(raw));
      if (latin1_) {
        get(*latin1_);
      } else {
        if (bin()) {
          out_ += 'X';
          put_le(6, 4);
          out_ += "latin1";
        } else {
          out_ += "Vlatin1\n";
        }
        latin1_ = memoize();
      }
      out_ += proto_ >= 2 ? '\x86' : 't';
      memoize();  // the argument tuple
    }
    out_ += 'R';
    const uint32_t idx = memoize();
    if (shared) bytes_memo_.emplace(raw, idx);
  }

  void save_list(const Value::List& items) {
    out_ += bin() ? "]" : "(l";
    memoize();
    save_batched(
        items.size(), [&](size_t i) { save(items[i]); }, 'a', 'e', false);
  }

  void save_dict(const Value::Dict& entries) {
    out_ += bin() ? "}" : "(d";
    memoize();
    save_batched(
        entries.size(),
        [&](size_t i) {
          save(entries[i].first);
          save(entries[i].second);
        },
        's', 'u', true);
  }

  // Protocol 0 adds items one at a time; binary protocols add a lone item alone and otherwise
  // in MARK ... batches of kBatchSize (CPython's batch_list_exact / batch_dict_exact). The dict
  // loop there runs again after every full batch, so a dict whose size is a multiple of
  // kBatchSize ends with an empty batch; the list loop does not.
  template <class SaveItem>
  void save_batched(size_t n, SaveItem save_item, char one, char many, bool empty_tail) {
    if (!bin() || n == 1) {
      for (size_t i = 0; i < n; ++i) {
        save_item(i);
        out_ += one;
      }
      return;
    }
    if (n == 0) return;
    for (size_t i = 0, batch = 0; i < n || (empty_tail && batch == kBatchSize);) {
      out_ += '(';
      batch = 0;
      for (; i < n && batch < kBatchSize; ++i, ++batch) save_item(i);
      out_ += many;
    }
  }

  void save_tuple(const Value::List& items) {
    if (items.empty()) {  // the empty tuple is not memoized
      out_ += bin() ? ")" : "(t";
      return;
    }
    const bool short_form = proto_ >= 2 && items.size() <= 3;
    if (!short_form) out_ += '(';
    for (const Value& item : items) save(item);
    out_ += short_form ? static_cast<char>(0x84 + items.size()) : 't';
    memoize();
  }

  const int proto_;
  std::string out_;
  uint32_t next_memo_ = 0;
  std::map<std::string, uint32_t, std::less<>> str_memo_;    // shared strs -> memo index
  std::map<std::string, uint32_t, std::less<>> bytes_memo_;  // shared bytes -> memo index
  std::optional<uint32_t> encode_global_, bytes_global_, latin1_;
};

// ---------------------------------------------------------------------------- repr

void repr_quoted(std::string& out, std::string_view s, bool is_bytes) {
  if (is_bytes) out += 'b';
  out += '\'';
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = static_cast<unsigned char>(s[i]);
    if (is_bytes) {
      ++i;
    } else {
      cp = next_code_point(s, i);
      if (cp == kBadCodePoint) cp = static_cast<unsigned char>(s[i++]);  // not held by Value
    }
    if (cp == '\\' || cp == '\'') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp >= 0x20 && cp < 0x7F) {
      out += static_cast<char>(cp);
    } else {
      std::snprintf(buf, sizeof buf,
                    cp < 0x100     ? "\\x%02x"
                    : cp < 0x10000 ? "\\u%04x"
                                   : "\\U%08x",
                    cp);
      out += buf;
    }
  }
  out += '\'';
}

void repr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      out += python_float_repr(v.as_float());
      return;
    case Value::Kind::kStr:
    case Value::Kind::kBytes:
      repr_quoted(out, v.as_string(), v.is_bytes());
      return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const auto& items = v.as_list();
      out += v.is_list() ? '[' : '(';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        repr(out, items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ',';
      out += v.is_list() ? ']' : ')';
      return;
    }
    case Value::Kind::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.as_dict()) {
        if (!first) out += ", ";
        first = false;
        repr(out, k);
        out += ": ";
        repr(out, val);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

std::optional<std::string> wsgi_bytes(std::string_view utf8_text) {
  return utf8_to_latin1(utf8_text);
}

// ---------------------------------------------------------------------------- Value

bool Value::as_bool() const {
  APUS_CHECK(is_bool());
  return std::get<bool>(v_);
}
int64_t Value::as_int() const {
  APUS_CHECK(is_int());
  return std::get<int64_t>(v_);
}
double Value::as_float() const {
  APUS_CHECK(is_float());
  return std::get<double>(v_);
}
const std::string& Value::as_str() const {
  APUS_CHECK(is_str());
  return std::get<std::string>(v_);
}
const std::string& Value::as_bytes() const {
  APUS_CHECK(is_bytes());
  return std::get<std::string>(v_);
}
const std::string& Value::as_string() const {
  APUS_CHECK(is_str() || is_bytes());
  return std::get<std::string>(v_);
}
const Value::List& Value::as_list() const {
  APUS_CHECK(is_list() || is_tuple());
  return std::get<List>(v_);
}
Value::List& Value::as_list() {
  APUS_CHECK(is_list() || is_tuple());
  return std::get<List>(v_);
}
const Value::Dict& Value::as_dict() const {
  APUS_CHECK(is_dict());
  return std::get<Dict>(v_);
}
Value::Dict& Value::as_dict() {
  APUS_CHECK(is_dict());
  return std::get<Dict>(v_);
}

const Value* Value::find(std::string_view key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : as_dict()) {
    if ((k.is_str() || k.is_bytes()) && k.as_string() == key) return &v;
  }
  return nullptr;
}

Value* Value::find(std::string_view key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->find(key));
}

void Value::set(Value key, Value value) {
  for (auto& [k, v] : as_dict()) {
    if (key_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  as_dict().emplace_back(std::move(key), std::move(value));
}

bool operator==(const Value& a, const Value& b) { return a.kind_ == b.kind_ && a.v_ == b.v_; }

std::string Value::debug_string() const {
  std::string out;
  repr(out, *this);
  return out;
}

// ---------------------------------------------------------------------------- entry points

namespace {

Result<Value> loads_impl(std::string_view data, bool* py3_bytes) {
  Parser parser(data);
  Result<Value> v = parser.run();
  *py3_bytes = parser.saw_py3_bytes();
  return v;
}

// One stored metadata key or value as wire bytes (rule in the header).
Result<std::string> metadata_item_to_wire(const Value& item, bool py3, bool is_name) {
  if (item.is_bytes()) {
    const std::string& stored = item.as_bytes();
    if (!py3 || is_name) return stored;
    // Not a WSGI string (real Unicode, or not UTF-8 at all): the stored bytes are the best guess.
    std::optional<std::string> wire = utf8_to_latin1(stored);
    if (!wire) return stored;
    return std::move(*wire);
  }
  if (item.is_str()) {
    if (!is_name) {
      if (std::optional<std::string> wire = utf8_to_latin1(item.as_str())) return std::move(*wire);
    }
    return undo_surrogateescape(item.as_str());
  }
  if (std::optional<std::string> text = python_str(item)) return std::move(*text);
  return Status::corruption("pickle: object metadata item is " + item.debug_string() +
                            ", not a string");
}

}  // namespace

// Python's repr(float): the shortest digits that round-trip, fixed notation for decimal
// exponents in [-4, 16), scientific otherwise, and always a '.0' or an exponent.
std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // [-]D[.DDD]e(+|-)XX
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') out += '-', i = 1;
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  int exp10 = 0;
  (void)std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(),
                        exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (ndigits > 1) out += '.', out.append(digits, 1);
    char ebuf[8];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += ebuf;
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= ndigits) {
    out += digits;
    out.append(static_cast<size_t>(decpt - ndigits), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<size_t>(decpt));
  }
  return out;
}

Result<Value> loads(std::string_view data) {
  bool py3_bytes = false;
  return loads_impl(data, &py3_bytes);
}

std::string dumps(const Value& v, int protocol) {
  APUS_CHECK(protocol >= 0 && protocol <= 2);
  return Writer(protocol).run(v);
}

namespace internal {

std::optional<std::vector<std::pair<std::string, std::string>>> decode_plain_object_metadata(
    std::string_view in) {
  // What a stack or memo slot holds. A view points into `in`.
  struct Item {
    enum class Kind : uint8_t { kDict, kText, kBytes, kEncode, kBytesType, kNoArgs, kArgs };
    Kind kind;
    std::string_view text;  // kText, kBytes; kArgs: the text to encode
  };
  using Kind = Item::Kind;
  constexpr size_t kMaxPairs = 64;  // duplicate keys are looked for pairwise
  boost::container::small_vector<Item, 32> stack;
  boost::container::small_vector<Item, 96> memo;
  uint64_t memo_base = 0;  // the first memo index
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(16);  // Swift's metadata: 6 pairs and the user's
  size_t pos = 0;
  size_t produced = 0;  // bytes of keys and values: at most the input's (memo GETs may repeat)
  auto take = [&](size_t n, std::string_view* s) { return take_bytes(in, pos, n, s); };
  auto take_le = [&](size_t n, uint64_t* v) { return take_le_number(in, pos, n, v); };
  auto ascii = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  };
  // A counted string of ASCII (where every reading rule of the header gives the bytes as
  // stored), pushed as `kind`.
  auto push_counted = [&](size_t len_bytes, Kind kind) {
    uint64_t len = 0;
    std::string_view s;
    if (!take_le(len_bytes, &len) || len > in.size() - pos || !take(len, &s) || !ascii(s))
      return false;
    stack.push_back({kind, s});
    return true;
  };
  auto is_string = [](const Item& i) { return i.kind == Kind::kText || i.kind == Kind::kBytes; };
  // Moves the pairs above stack[first] into the dict below them.
  auto set_items = [&](size_t first) {
    if (first == 0 || stack[first - 1].kind != Kind::kDict || (stack.size() - first) % 2 != 0)
      return false;
    for (size_t i = first; i < stack.size(); i += 2) {
      if (!is_string(stack[i]) || !is_string(stack[i + 1])) return false;
      produced += stack[i].text.size() + stack[i + 1].text.size();
      if (out.size() == kMaxPairs || produced > in.size()) return false;
      for (const auto& [k, v] : out) {
        if (k == stack[i].text) return false;  // Python keeps the last value: the long way
      }
      out.emplace_back(stack[i].text, stack[i + 1].text);
    }
    stack.resize(first);
    return true;
  };
  size_t mark = 0;  // 1 + the stack size at the open MARK; 0: none open
  // Items on the stack above the open MARK, if any.
  auto above_mark = [&] { return stack.size() - (mark == 0 ? 0 : mark - 1); };
  for (;;) {
    uint64_t n = 0;
    if (pos >= in.size()) return std::nullopt;
    switch (static_cast<uint8_t>(in[pos++])) {
      case 0x80:  // PROTO
        if (!take_le(1, &n) || n > 5) return std::nullopt;
        break;
      case '}':  // EMPTY_DICT: only the top-level one
        if (!stack.empty() || !memo.empty()) return std::nullopt;
        stack.push_back({Kind::kDict, {}});
        break;
      case '(':  // MARK
        if (mark != 0) return std::nullopt;
        mark = stack.size() + 1;
        break;
      case 'X':  // BINUNICODE
        if (!push_counted(4, Kind::kText)) return std::nullopt;
        break;
      case 0x8C:  // SHORT_BINUNICODE
        if (!push_counted(1, Kind::kText)) return std::nullopt;
        break;
      case 'T':  // BINSTRING (Python 2)
      case 'B':  // BINBYTES
        if (!push_counted(4, Kind::kBytes)) return std::nullopt;
        break;
      case 'U':  // SHORT_BINSTRING (Python 2)
      case 'C':  // SHORT_BINBYTES
        if (!push_counted(1, Kind::kBytes)) return std::nullopt;
        break;
      case 'c': {  // GLOBAL
        const size_t nl1 = in.find('\n', pos);
        const size_t nl2 = nl1 == std::string_view::npos ? nl1 : in.find('\n', nl1 + 1);
        if (nl2 == std::string_view::npos) return std::nullopt;
        std::optional<Global> g =
            allowed_global(in.substr(pos, nl1 - pos), in.substr(nl1 + 1, nl2 - nl1 - 1));
        pos = nl2 + 1;
        if (g == Global::kCodecsEncode) {
          stack.push_back({Kind::kEncode, {}});
        } else if (g == Global::kBytes) {
          stack.push_back({Kind::kBytesType, {}});
        } else {
          return std::nullopt;
        }
        break;
      }
      case ')':  // EMPTY_TUPLE
        stack.push_back({Kind::kNoArgs, {}});
        break;
      case 0x86:  // TUPLE2: (text, 'latin1'), the arguments of _codecs.encode
        if (above_mark() < 2 || stack[stack.size() - 2].kind != Kind::kText ||
            stack.back().kind != Kind::kText || !is_latin1_codec(stack.back().text))
          return std::nullopt;
        stack.pop_back();
        stack.back().kind = Kind::kArgs;
        break;
      case 'R': {  // REDUCE: _codecs.encode(text, 'latin1') or bytes()
        if (above_mark() < 2) return std::nullopt;
        const Item args = stack.back();
        stack.pop_back();
        Item& callable = stack.back();
        if (callable.kind == Kind::kEncode && args.kind == Kind::kArgs) {
          callable = {Kind::kBytes, args.text};  // ASCII: its latin-1 bytes are itself
        } else if (callable.kind == Kind::kBytesType && args.kind == Kind::kNoArgs) {
          callable = {Kind::kBytes, {}};
        } else {
          return std::nullopt;
        }
        break;
      }
      case 'q':  // BINPUT
      case 'r':  // LONG_BINPUT: numbered in order, from 0 (Python 3) or 1 (Python 2's cPickle)
        if (!take_le(in[pos - 1] == 'q' ? 1 : 4, &n) || above_mark() < 1) return std::nullopt;
        if (memo.empty() && n <= 1) memo_base = n;
        if (n != memo_base + memo.size()) return std::nullopt;
        memo.push_back(stack.back());
        break;
      case 'h':  // BINGET
      case 'j':  // LONG_BINGET
        if (!take_le(in[pos - 1] == 'h' ? 1 : 4, &n) || n < memo_base ||
            n - memo_base >= memo.size() || memo[n - memo_base].kind == Kind::kDict)
          return std::nullopt;
        stack.push_back(memo[n - memo_base]);
        break;
      case 's':  // SETITEM
        if (mark != 0 || stack.size() != 3 || !set_items(1)) return std::nullopt;
        break;
      case 'u':  // SETITEMS
        if (mark == 0 || !set_items(mark - 1)) return std::nullopt;
        mark = 0;
        break;
      case '.':  // STOP
        if (mark != 0 || stack.size() != 1 || stack[0].kind != Kind::kDict) return std::nullopt;
        return out;
      default:
        return std::nullopt;
    }
  }
}

Result<std::vector<std::pair<std::string, std::string>>> decode_general_object_metadata(
    std::string_view pickle_bytes) {
  bool py3 = false;
  Result<Value> v = loads_impl(pickle_bytes, &py3);
  if (!v.ok()) return v.status();
  if (!v->is_dict()) return Status::corruption("pickle: object metadata is not a dict");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(v->as_dict().size());
  for (const auto& [k, val] : v->as_dict()) {
    Result<std::string> key = metadata_item_to_wire(k, py3, false);
    if (!key.ok()) return key.status();
    Result<std::string> value = metadata_item_to_wire(val, py3, *key == "name");
    if (!value.ok()) return value.status();
    out.emplace_back(std::move(*key), std::move(*value));
  }
  return out;
}

}  // namespace internal

Result<std::vector<std::pair<std::string, std::string>>> decode_object_metadata(
    std::string_view pickle_bytes) {
  if (auto plain = internal::decode_plain_object_metadata(pickle_bytes)) return std::move(*plain);
  return internal::decode_general_object_metadata(pickle_bytes);
}

std::string encode_object_metadata(
    const std::vector<std::pair<std::string, std::string>>& wire_metadata) {
  // What Swift stores: utf8(WSGI string) for every item but name's value, which is real UTF-8.
  Value::Dict entries;
  entries.reserve(wire_metadata.size());
  for (const auto& [key, value] : wire_metadata) {
    entries.emplace_back(Value::bytes(latin1_to_utf8(key)),
                         Value::bytes(key == "name" ? value : latin1_to_utf8(value)));
  }
  return dumps(Value::dict(std::move(entries)), 2);
}

}  // namespace apus::common::pickle
