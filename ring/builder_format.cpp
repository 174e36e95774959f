// The builder file: Apus's own format (ring/FORMAT.md "## .builder") and the import of stock
// Swift `.builder` pickles.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <sys/stat.h>
#include <zlib.h>

#include "common/io/fs.h"
#include "ring/builder.h"
#include "ring/internal/builder_util.h"

namespace apus::ring {

using common::Result;
using common::Status;
using internal::py_float_repr;
using internal::strprintf;

namespace {

constexpr char kMagic[8] = {'A', 'P', 'U', 'S', 'B', 'L', 'D', 'R'};
constexpr uint32_t kFormatVersion = 1;
// Magic, version and header length.
constexpr std::size_t kPrefixBytes = sizeof(kMagic) + 4 + 4;
// A part power 24, 3 replica builder is ~110 MB unpacked; anything past this is not a builder.
constexpr std::size_t kMaxBuilderBytes = std::size_t{1} << 33;
// What load_builder_file reads from disk at most (a compressed or pickled builder).
constexpr std::size_t kMaxFileBytes = std::size_t{1} << 31;
constexpr int kGzipLevel = 1;

// --- gzip

std::string gzip_compress(std::string_view in) {
  z_stream zs{};
  // 16 + MAX_WBITS: gzip wrapper.
  if (deflateInit2(&zs, kGzipLevel, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    APUS_CHECK(false && "deflateInit2");
  }
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(in.size())) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  APUS_CHECK(rc == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

Result<std::string> gzip_decompress(std::string_view in) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return Status::io_error("inflateInit2 failed");
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.size() >= kMaxBuilderBytes) {
      inflateEnd(&zs);
      return Status::corruption("builder file unpacks to more than 8 GiB");
    }
    const std::size_t have = out.size();
    out.resize(have + std::max<std::size_t>(in.size() * 4, 1 << 16));
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    zs.avail_out = static_cast<uInt>(out.size() - have);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(out.size() - zs.avail_out);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return Status::corruption(rc == Z_BUF_ERROR ? "truncated gzip stream" : "bad gzip stream");
    }
  }
  inflateEnd(&zs);
  return out;
}

// --- little-endian helpers

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// --- JSON writing (by hand so floats read as Python prints them: 100.0, 0.5)

void json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += strprintf("\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string header_json(const BuilderState& s) {
  std::string j = "{";
  auto key = [&](const char* k) {
    if (j.size() > 1) j += ", ";
    json_string(j, k);
    j += ": ";
  };
  key("format");
  json_string(j, "apus-ring-builder");
  key("part_power");
  j += std::to_string(s.part_power);
  key("next_part_power");
  j += s.next_part_power ? std::to_string(*s.next_part_power) : "null";
  key("replicas");
  j += py_float_repr(s.replicas);
  key("min_part_hours");
  j += std::to_string(s.min_part_hours);
  key("overload");
  j += py_float_repr(s.overload);
  key("version");
  j += std::to_string(s.version);
  key("id");
  json_string(j, s.id);
  key("devs_changed");
  j += s.devs_changed ? "true" : "false";
  key("dispersion");
  j += s.dispersion ? py_float_repr(*s.dispersion) : "null";
  key("last_part_moves_epoch");
  j += std::to_string(s.last_part_moves_epoch);
  key("last_part_gather_start");
  j += std::to_string(s.last_part_gather_start);
  key("remove_devs");
  j += "[";
  for (std::size_t i = 0; i < s.remove_devs.size(); ++i) {
    j += (i ? ", " : "") + std::to_string(s.remove_devs[i]);
  }
  j += "]";
  key("row_lengths");
  j += "[";
  for (std::size_t i = 0; i < s.replica2part2dev.size(); ++i) {
    j += (i ? ", " : "") + std::to_string(s.replica2part2dev[i].size());
  }
  j += "]";
  key("devs");
  j += "[";
  for (std::size_t i = 0; i < s.devs.size(); ++i) {
    if (i) j += ", ";
    if (!s.devs[i]) {
      j += "null";
      continue;
    }
    const BuilderDevice& d = *s.devs[i];
    j += strprintf("{\"id\": %d, \"region\": %d, \"zone\": %d, \"ip\": ", d.id, d.region, d.zone);
    json_string(j, d.ip);
    j += strprintf(", \"port\": %d, \"replication_ip\": ", d.port);
    json_string(j, d.replication_ip);
    j += strprintf(", \"replication_port\": %d, \"device\": ", d.replication_port);
    json_string(j, d.device);
    j += ", \"weight\": " + py_float_repr(d.weight) + ", \"meta\": ";
    json_string(j, d.meta);
    j += "}";
  }
  j += "]}";
  return j;
}

// --- JSON reading

namespace json = boost::json;

Status bad(const std::string& what) { return Status::corruption("bad builder file: " + what); }

bool get_int(const json::object& o, const char* k, int64_t& out) {
  const json::value* v = o.if_contains(k);
  if (!v) return false;
  if (v->is_int64()) {
    out = v->as_int64();
    return true;
  }
  if (v->is_uint64() && v->as_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    out = static_cast<int64_t>(v->as_uint64());
    return true;
  }
  return false;
}
bool get_double(const json::object& o, const char* k, double& out) {
  const json::value* v = o.if_contains(k);
  if (!v) return false;
  if (v->is_double()) {
    out = v->as_double();
  } else if (v->is_int64()) {
    out = static_cast<double>(v->as_int64());
  } else if (v->is_uint64()) {
    out = static_cast<double>(v->as_uint64());
  } else {
    return false;
  }
  return true;
}
bool get_string(const json::object& o, const char* k, std::string& out) {
  const json::value* v = o.if_contains(k);
  if (!v || !v->is_string()) return false;
  out.assign(v->as_string().begin(), v->as_string().end());
  return true;
}
bool fits_int(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

Result<RingBuilder> decode_apus(std::string_view p) {
  if (p.size() < kPrefixBytes + 4) return bad("truncated (no header)");
  const uint32_t version = get_u32(p.data() + 8);
  if (version != kFormatVersion) {
    return Status::corruption(strprintf(
        "unsupported builder file format version %u (this apus-ring-builder reads version %u)",
        version, kFormatVersion));
  }
  const uint32_t crc_stored = get_u32(p.data() + p.size() - 4);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(p.data()), static_cast<uInt>(p.size() - 4)));
  const uint32_t json_len = get_u32(p.data() + 12);
  if (json_len > p.size() - kPrefixBytes - 4) return bad("truncated (header)");
  if (crc != crc_stored) return bad("checksum mismatch (truncated or damaged)");

  boost::system::error_code ec;
  json::value root = json::parse(p.substr(kPrefixBytes, json_len), ec);
  if (ec || !root.is_object()) return bad("header is not a JSON object");
  const json::object& o = root.as_object();
  std::string fmt;
  if (!get_string(o, "format", fmt) || fmt != "apus-ring-builder") return bad("wrong format name");

  BuilderState s;
  int64_t i64 = 0;
  if (!get_int(o, "part_power", i64) || i64 < 0 || i64 > kMaxPartPower) return bad("part_power");
  s.part_power = static_cast<int>(i64);
  if (const json::value* v = o.if_contains("next_part_power"); v && !v->is_null()) {
    if (!get_int(o, "next_part_power", i64) || !fits_int(i64)) return bad("next_part_power");
    s.next_part_power = static_cast<int>(i64);
  }
  if (!get_double(o, "replicas", s.replicas)) return bad("replicas");
  if (!get_int(o, "min_part_hours", i64) || !fits_int(i64)) return bad("min_part_hours");
  s.min_part_hours = static_cast<int>(i64);
  if (!get_double(o, "overload", s.overload)) return bad("overload");
  if (!get_int(o, "version", s.version)) return bad("version");
  if (!get_string(o, "id", s.id)) return bad("id");
  const json::value* dc = o.if_contains("devs_changed");
  if (!dc || !dc->is_bool()) return bad("devs_changed");
  s.devs_changed = dc->as_bool();
  if (const json::value* v = o.if_contains("dispersion"); v && !v->is_null()) {
    double d = 0;
    if (!get_double(o, "dispersion", d)) return bad("dispersion");
    s.dispersion = d;
  } else {
    s.dispersion = std::nullopt;
  }
  if (!get_int(o, "last_part_moves_epoch", s.last_part_moves_epoch)) {
    return bad("last_part_moves_epoch");
  }
  if (!get_int(o, "last_part_gather_start", s.last_part_gather_start)) {
    return bad("last_part_gather_start");
  }
  const json::value* rm = o.if_contains("remove_devs");
  if (!rm || !rm->is_array()) return bad("remove_devs");
  for (const json::value& v : rm->as_array()) {
    if (!v.is_int64() || !fits_int(v.as_int64())) return bad("remove_devs entry");
    s.remove_devs.push_back(static_cast<int>(v.as_int64()));
  }
  const json::value* devs = o.if_contains("devs");
  if (!devs || !devs->is_array()) return bad("devs");
  for (const json::value& v : devs->as_array()) {
    if (v.is_null()) {
      s.devs.emplace_back();
      continue;
    }
    if (!v.is_object()) return bad("device entry");
    const json::object& d = v.as_object();
    BuilderDevice dev;
    int64_t id, region, zone, port, rport;
    if (!get_int(d, "id", id) || !get_int(d, "region", region) || !get_int(d, "zone", zone) ||
        !get_int(d, "port", port) || !get_int(d, "replication_port", rport) ||
        !get_string(d, "ip", dev.ip) || !get_string(d, "replication_ip", dev.replication_ip) ||
        !get_string(d, "device", dev.device) || !get_string(d, "meta", dev.meta) ||
        !get_double(d, "weight", dev.weight) || !fits_int(id) || !fits_int(region) ||
        !fits_int(zone) || !fits_int(port) || !fits_int(rport)) {
      return bad(strprintf("device entry %zu", s.devs.size()));
    }
    dev.id = static_cast<int>(id);
    dev.region = static_cast<int>(region);
    dev.zone = static_cast<int>(zone);
    dev.port = static_cast<int>(port);
    dev.replication_port = static_cast<int>(rport);
    s.devs.emplace_back(std::move(dev));
  }
  const json::value* rl = o.if_contains("row_lengths");
  if (!rl || !rl->is_array()) return bad("row_lengths");
  const std::size_t parts = std::size_t{1} << s.part_power;
  std::size_t pos = kPrefixBytes + json_len;
  const std::size_t end = p.size() - 4;
  for (const json::value& v : rl->as_array()) {
    if (!v.is_int64() || v.as_int64() < 0 || static_cast<std::size_t>(v.as_int64()) > parts) {
      return bad("row length");
    }
    const std::size_t len = static_cast<std::size_t>(v.as_int64());
    if (end - pos < 2 * len) return bad("truncated (assignment rows)");
    std::vector<uint16_t> row(len);
    for (std::size_t k = 0; k < len; ++k) {
      row[k] = static_cast<uint16_t>(static_cast<uint8_t>(p[pos + 2 * k]) |
                                     (static_cast<uint8_t>(p[pos + 2 * k + 1]) << 8));
    }
    pos += 2 * len;
    s.replica2part2dev.push_back(std::move(row));
  }
  if (end - pos != parts) return bad("partition move history has the wrong size");
  s.last_part_moves.assign(p.begin() + static_cast<std::ptrdiff_t>(pos),
                           p.begin() + static_cast<std::ptrdiff_t>(end));
  return RingBuilder::from_state(std::move(s));
}

// --- A small pickle reader: enough of protocols 0-2 (and the common opcodes of 3-4) for the
// dicts, lists, arrays and scalars swift-ring-builder pickles. Nothing is ever executed: the
// only callables understood are array.array and _codecs.encode, interpreted here.

struct PyObj;
// Objects live in their reader's arena (a pickle may build cycles, e.g. a list holding itself),
// so references are plain pointers valid while the reader lives.
using PyRef = PyObj*;
struct PyObj {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kDict,
    kGlobal,
    kArray
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                              // str, bytes, global "module name", array typecode
  std::vector<PyRef> items;                   // list, tuple
  std::vector<std::pair<PyRef, PyRef>> dict;  // dict (insertion order)
  std::vector<int64_t> values;                // array contents
};

class PickleReader {
 public:
  explicit PickleReader(std::string_view data) : d_(data) { small_ints_.resize(256, nullptr); }
  PickleReader(const PickleReader&) = delete;
  PickleReader& operator=(const PickleReader&) = delete;

  Result<PyRef> load() {
    for (;;) {
      if (pos_ >= d_.size()) return fail("truncated (no STOP)");
      const uint8_t op = static_cast<uint8_t>(d_[pos_++]);
      Status st = step(op);
      if (!st.ok()) return st;
      if (done_) {
        if (stack_.size() != 1) return fail("bad stack at STOP");
        return stack_.back();
      }
    }
  }

 private:
  PyRef make(PyObj::Kind k) {
    arena_.emplace_back();
    arena_.back().kind = k;
    return &arena_.back();
  }
  Status fail(const std::string& what) const {
    return Status::corruption(
        strprintf("bad Swift builder pickle at byte %zu: %s", pos_, what.c_str()));
  }
  bool need(std::size_t n) const { return d_.size() - pos_ >= n; }
  uint64_t le(std::size_t n) {
    uint64_t v = 0;
    for (std::size_t k = 0; k < n; ++k)
      v |= uint64_t{static_cast<uint8_t>(d_[pos_ + k])} << (8 * k);
    pos_ += n;
    return v;
  }
  bool line(std::string& out) {
    const std::size_t nl = d_.find('\n', pos_);
    if (nl == std::string_view::npos) return false;
    out.assign(d_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return true;
  }
  PyRef int_obj(int64_t v) {
    if (v >= 0 && v < 256) {
      if (!small_ints_[v]) {
        small_ints_[v] = make(PyObj::Kind::kInt);
        small_ints_[v]->i = v;
      }
      return small_ints_[v];
    }
    PyRef o = make(PyObj::Kind::kInt);
    o->i = v;
    return o;
  }
  PyRef str_obj(std::string_view s, PyObj::Kind k = PyObj::Kind::kStr) {
    PyRef o = make(k);
    o->s.assign(s);
    return o;
  }
  Result<std::size_t> pop_mark() {
    if (marks_.empty()) return fail("no MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    if (m > stack_.size()) return fail("bad MARK");
    return m;
  }
  Result<PyRef> pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) return fail("stack underflow");
    PyRef v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Status push_str(std::size_t n, PyObj::Kind k = PyObj::Kind::kStr) {
    if (!need(n)) return fail("truncated string");
    stack_.push_back(str_obj(d_.substr(pos_, n), k));
    pos_ += n;
    return Status();
  }
  Status memo_put(uint64_t idx) {
    if (stack_.empty()) return fail("PUT on empty stack");
    memo_[idx] = stack_.back();
    return Status();
  }
  Status memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) return fail("GET of unknown memo entry");
    stack_.push_back(it->second);
    return Status();
  }
  Status add_items(PyRef target, std::size_t from) {
    if (target->kind == PyObj::Kind::kList) {
      for (std::size_t k = from; k < stack_.size(); ++k) target->items.push_back(stack_[k]);
    } else if (target->kind == PyObj::Kind::kDict) {
      if ((stack_.size() - from) % 2) return fail("odd SETITEMS");
      for (std::size_t k = from; k < stack_.size(); k += 2) {
        target->dict.emplace_back(stack_[k], stack_[k + 1]);
      }
    } else {
      return fail("APPENDS/SETITEMS on a non-container");
    }
    stack_.resize(from);
    return Status();
  }
  Result<PyRef> reduce(const PyRef& fn, const PyRef& args) {
    if (args->kind != PyObj::Kind::kTuple) return fail("REDUCE without an argument tuple");
    if (fn->s == "array array" && !args->items.empty() &&
        args->items[0]->kind == PyObj::Kind::kStr) {
      PyRef a = make(PyObj::Kind::kArray);
      a->s = args->items[0]->s;
      const std::size_t width = a->s == "H" ? 2 : a->s == "B" ? 1 : 0;
      if (width == 0) return fail("array of unsupported type " + a->s);
      if (args->items.size() < 2) return a;
      const PyRef& init = args->items[1];
      if (init->kind == PyObj::Kind::kList) {
        a->values.reserve(init->items.size());
        for (const PyRef& v : init->items) {
          if (v->kind != PyObj::Kind::kInt) return fail("array of non-integers");
          a->values.push_back(v->i);
        }
      } else if (init->kind == PyObj::Kind::kStr || init->kind == PyObj::Kind::kBytes) {
        // Python 2 pickles arrays as their machine bytes (little-endian here).
        const std::string& b = init->s;
        for (std::size_t k = 0; k + width <= b.size(); k += width) {
          int64_t v = static_cast<uint8_t>(b[k]);
          if (width == 2) v |= static_cast<int64_t>(static_cast<uint8_t>(b[k + 1])) << 8;
          a->values.push_back(v);
        }
      } else {
        return fail("array initializer");
      }
      return a;
    }
    if (fn->s == "_codecs encode" && args->items.size() == 2) {
      // Python 3 bytes at protocol 2: the text is the bytes as latin-1 code points.
      PyRef b = make(PyObj::Kind::kBytes);
      const std::string& u = args->items[0]->s;
      for (std::size_t k = 0; k < u.size(); ++k) {
        const uint8_t c = static_cast<uint8_t>(u[k]);
        if (c < 0x80) {
          b->s.push_back(static_cast<char>(c));
        } else if (k + 1 < u.size()) {
          b->s.push_back(
              static_cast<char>(((c & 0x1f) << 6) | (static_cast<uint8_t>(u[k + 1]) & 0x3f)));
          ++k;
        }
      }
      return b;
    }
    return fail("unsupported callable " + fn->s);
  }

  Status step(uint8_t op) {
    using K = PyObj::Kind;
    switch (op) {
      case 0x80:  // PROTO
        if (!need(1)) return fail("truncated PROTO");
        ++pos_;
        return Status();
      case 0x95:  // FRAME
        if (!need(8)) return fail("truncated FRAME");
        pos_ += 8;
        return Status();
      case '.':  // STOP
        done_ = true;
        return Status();
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return Status();
      case '}':
        stack_.push_back(make(K::kDict));
        return Status();
      case ']':
        stack_.push_back(make(K::kList));
        return Status();
      case ')':
        stack_.push_back(make(K::kTuple));
        return Status();
      case 'N':
        stack_.push_back(make(K::kNone));
        return Status();
      case 0x88:
      case 0x89: {
        PyRef b = make(K::kBool);
        b->i = op == 0x88;
        stack_.push_back(b);
        return Status();
      }
      case 'K':
        if (!need(1)) return fail("truncated BININT1");
        stack_.push_back(int_obj(static_cast<int64_t>(le(1))));
        return Status();
      case 'M':
        if (!need(2)) return fail("truncated BININT2");
        stack_.push_back(int_obj(static_cast<int64_t>(le(2))));
        return Status();
      case 'J':
        if (!need(4)) return fail("truncated BININT");
        stack_.push_back(int_obj(static_cast<int32_t>(static_cast<uint32_t>(le(4)))));
        return Status();
      case 0x8a: {  // LONG1
        if (!need(1)) return fail("truncated LONG1");
        const std::size_t n = static_cast<std::size_t>(le(1));
        if (n > 8 || !need(n)) return fail("LONG1 too large");
        uint64_t v = n ? le(n) : 0;
        if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        stack_.push_back(int_obj(static_cast<int64_t>(v)));
        return Status();
      }
      case 'I':
      case 'L': {  // INT / LONG (text)
        std::string l;
        if (!line(l)) return fail("truncated INT");
        if (!l.empty() && l.back() == 'L') l.pop_back();
        if (l == "01" || l == "00") {
          PyRef b = make(K::kBool);
          b->i = l == "01";
          stack_.push_back(b);
          return Status();
        }
        try {
          stack_.push_back(int_obj(std::stoll(l)));
        } catch (...) {
          return fail("bad INT");
        }
        return Status();
      }
      case 'G': {  // BINFLOAT, big-endian
        if (!need(8)) return fail("truncated BINFLOAT");
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(d_[pos_ + k]);
        pos_ += 8;
        PyRef f = make(K::kFloat);
        std::memcpy(&f->f, &bits, sizeof(double));
        stack_.push_back(f);
        return Status();
      }
      case 'F': {
        std::string l;
        if (!line(l)) return fail("truncated FLOAT");
        PyRef f = make(K::kFloat);
        try {
          f->f = std::stod(l);
        } catch (...) {
          return fail("bad FLOAT");
        }
        stack_.push_back(f);
        return Status();
      }
      case 'X':  // BINUNICODE
        if (!need(4)) return fail("truncated BINUNICODE");
        return push_str(static_cast<std::size_t>(le(4)));
      case 0x8c:  // SHORT_BINUNICODE
        if (!need(1)) return fail("truncated SHORT_BINUNICODE");
        return push_str(static_cast<std::size_t>(le(1)));
      case 'T':  // BINSTRING (Python 2 str)
        if (!need(4)) return fail("truncated BINSTRING");
        return push_str(static_cast<std::size_t>(le(4)));
      case 'U':  // SHORT_BINSTRING
        if (!need(1)) return fail("truncated SHORT_BINSTRING");
        return push_str(static_cast<std::size_t>(le(1)));
      case 'B':  // BINBYTES
        if (!need(4)) return fail("truncated BINBYTES");
        return push_str(static_cast<std::size_t>(le(4)), K::kBytes);
      case 'C':  // SHORT_BINBYTES
        if (!need(1)) return fail("truncated SHORT_BINBYTES");
        return push_str(static_cast<std::size_t>(le(1)), K::kBytes);
      case 'V': {  // UNICODE (protocol 0; raw-unicode-escape, ASCII in practice)
        std::string l;
        if (!line(l)) return fail("truncated UNICODE");
        stack_.push_back(str_obj(l));
        return Status();
      }
      case 'S': {  // STRING (protocol 0, quoted repr)
        std::string l;
        if (!line(l) || l.size() < 2) return fail("truncated STRING");
        stack_.push_back(str_obj(std::string_view(l).substr(1, l.size() - 2)));
        return Status();
      }
      case 'q':
        if (!need(1)) return fail("truncated BINPUT");
        return memo_put(le(1));
      case 'r':
        if (!need(4)) return fail("truncated LONG_BINPUT");
        return memo_put(le(4));
      case 'p': {
        std::string l;
        if (!line(l)) return fail("truncated PUT");
        try {
          return memo_put(std::stoull(l));
        } catch (...) {
          return fail("bad PUT");
        }
      }
      case 0x94:  // MEMOIZE
        return memo_put(memo_.size());
      case 'h':
        if (!need(1)) return fail("truncated BINGET");
        return memo_get(le(1));
      case 'j':
        if (!need(4)) return fail("truncated LONG_BINGET");
        return memo_get(le(4));
      case 'g': {
        std::string l;
        if (!line(l)) return fail("truncated GET");
        try {
          return memo_get(std::stoull(l));
        } catch (...) {
          return fail("bad GET");
        }
      }
      case 'c': {  // GLOBAL
        std::string mod, name;
        if (!line(mod) || !line(name)) return fail("truncated GLOBAL");
        PyRef g = make(K::kGlobal);
        g->s = mod + " " + name;
        stack_.push_back(g);
        return Status();
      }
      case 0x93: {  // STACK_GLOBAL
        Result<PyRef> name = pop();
        if (!name.ok()) return name.status();
        Result<PyRef> mod = pop();
        if (!mod.ok()) return mod.status();
        PyRef g = make(K::kGlobal);
        g->s = (*mod)->s + " " + (*name)->s;
        stack_.push_back(g);
        return Status();
      }
      case 'R': {  // REDUCE
        Result<PyRef> args = pop();
        if (!args.ok()) return args.status();
        Result<PyRef> fn = pop();
        if (!fn.ok()) return fn.status();
        if ((*fn)->kind != K::kGlobal) return fail("REDUCE of a non-global");
        Result<PyRef> r = reduce(*fn, *args);
        if (!r.ok()) return r.status();
        stack_.push_back(*r);
        return Status();
      }
      case 't':
      case 'l':
      case 'd': {  // TUPLE / LIST / DICT from the mark
        Result<std::size_t> m = pop_mark();
        if (!m.ok()) return m.status();
        PyRef c = make(op == 't' ? K::kTuple : op == 'l' ? K::kList : K::kDict);
        if (op == 'd') {
          if ((stack_.size() - *m) % 2) return fail("odd DICT");
          for (std::size_t k = *m; k < stack_.size(); k += 2) {
            c->dict.emplace_back(stack_[k], stack_[k + 1]);
          }
        } else {
          c->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(*m), stack_.end());
        }
        stack_.resize(*m);
        stack_.push_back(c);
        return Status();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const std::size_t n = op - 0x84;
        if (stack_.size() < n) return fail("stack underflow");
        PyRef c = make(K::kTuple);
        c->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        stack_.push_back(c);
        return Status();
      }
      case 'a': {  // APPEND
        Result<PyRef> v = pop();
        if (!v.ok()) return v.status();
        if (stack_.empty() || stack_.back()->kind != K::kList) return fail("APPEND to a non-list");
        stack_.back()->items.push_back(*v);
        return Status();
      }
      case 's': {  // SETITEM
        if (stack_.size() < 3) return fail("stack underflow");
        PyRef v = stack_.back();
        stack_.pop_back();
        PyRef k = stack_.back();
        stack_.pop_back();
        if (stack_.back()->kind != K::kDict) return fail("SETITEM on a non-dict");
        stack_.back()->dict.emplace_back(k, v);
        return Status();
      }
      case 'e':
      case 'u': {  // APPENDS / SETITEMS
        Result<std::size_t> m = pop_mark();
        if (!m.ok()) return m.status();
        if (*m == 0) return fail("APPENDS/SETITEMS without a target");
        return add_items(stack_[*m - 1], *m);
      }
      case '0':  // POP
        if (stack_.empty()) return fail("POP on empty stack");
        stack_.pop_back();
        return Status();
      default:
        return fail(strprintf("unsupported opcode 0x%02x", op));
    }
  }

  std::string_view d_;
  std::size_t pos_ = 0;
  bool done_ = false;
  std::vector<PyRef> stack_;
  std::vector<std::size_t> marks_;
  std::map<uint64_t, PyRef> memo_;
  std::vector<PyRef> small_ints_;
  std::deque<PyObj> arena_;  // owns every object; a deque keeps their addresses stable
};

const PyObj* dict_get(const PyObj& d, std::string_view key) {
  for (const auto& [k, v] : d.dict) {
    if ((k->kind == PyObj::Kind::kStr || k->kind == PyObj::Kind::kBytes) && k->s == key) {
      return v;
    }
  }
  return nullptr;
}
bool as_int(const PyObj* o, int64_t& out) {
  if (!o) return false;
  if (o->kind == PyObj::Kind::kInt || o->kind == PyObj::Kind::kBool) {
    out = o->i;
    return true;
  }
  if (o->kind == PyObj::Kind::kFloat && std::abs(o->f) < 9.0e18) {
    out = static_cast<int64_t>(o->f);
    return true;
  }
  return false;
}
bool as_double(const PyObj* o, double& out) {
  if (!o) return false;
  if (o->kind == PyObj::Kind::kFloat) {
    out = o->f;
    return true;
  }
  if (o->kind == PyObj::Kind::kInt) {
    out = static_cast<double>(o->i);
    return true;
  }
  return false;
}
bool as_str(const PyObj* o, std::string& out) {
  if (!o || (o->kind != PyObj::Kind::kStr && o->kind != PyObj::Kind::kBytes)) return false;
  out = o->s;
  return true;
}
bool is_none(const PyObj* o) { return !o || o->kind == PyObj::Kind::kNone; }
// An array('H'/'B') or a plain list of ints.
bool as_int_vector(const PyObj* o, std::vector<int64_t>& out) {
  if (!o) return false;
  if (o->kind == PyObj::Kind::kArray) {
    out = o->values;
    return true;
  }
  if (o->kind != PyObj::Kind::kList) return false;
  out.clear();
  for (const PyRef& v : o->items) {
    if (v->kind != PyObj::Kind::kInt) return false;
    out.push_back(v->i);
  }
  return true;
}

Status bad_pickle(const std::string& what) {
  return Status::corruption("bad Swift builder pickle: " + what);
}

Result<RingBuilder> decode_pickle(std::string_view data) {
  PickleReader reader(data);
  Result<PyRef> root = reader.load();
  if (!root.ok()) return root.status();
  const PyObj& d = **root;
  if (d.kind != PyObj::Kind::kDict) return bad_pickle("not a dict (an old RingBuilder object?)");
  BuilderState s;
  int64_t i64 = 0;
  if (!as_int(dict_get(d, "part_power"), i64) || i64 < 0 || i64 > kMaxPartPower) {
    return bad_pickle("part_power");
  }
  s.part_power = static_cast<int>(i64);
  if (const PyObj* v = dict_get(d, "next_part_power"); !is_none(v)) {
    if (!as_int(v, i64)) return bad_pickle("next_part_power");
    s.next_part_power = static_cast<int>(i64);
  }
  if (!as_double(dict_get(d, "replicas"), s.replicas)) return bad_pickle("replicas");
  if (!as_int(dict_get(d, "min_part_hours"), i64)) return bad_pickle("min_part_hours");
  s.min_part_hours = static_cast<int>(i64);
  if (const PyObj* v = dict_get(d, "overload"); !is_none(v) && !as_double(v, s.overload)) {
    return bad_pickle("overload");
  }
  if (!as_int(dict_get(d, "version"), s.version)) return bad_pickle("version");
  if (const PyObj* v = dict_get(d, "id"); !is_none(v) && !as_str(v, s.id)) {
    return bad_pickle("id");
  }
  if (const PyObj* v = dict_get(d, "devs_changed"); v && as_int(v, i64)) s.devs_changed = i64;
  if (const PyObj* v = dict_get(d, "dispersion"); is_none(v)) {
    s.dispersion = std::nullopt;
  } else {
    double disp = 0;
    if (!as_double(v, disp)) return bad_pickle("dispersion");
    s.dispersion = disp;
  }
  if (const PyObj* v = dict_get(d, "_last_part_moves_epoch"); !is_none(v)) {
    if (!as_int(v, s.last_part_moves_epoch)) return bad_pickle("_last_part_moves_epoch");
  }
  if (const PyObj* v = dict_get(d, "_last_part_gather_start"); !is_none(v)) {
    if (!as_int(v, s.last_part_gather_start)) return bad_pickle("_last_part_gather_start");
  }
  const PyObj* devs = dict_get(d, "devs");
  if (!devs || devs->kind != PyObj::Kind::kList) return bad_pickle("devs");
  for (const PyRef& v : devs->items) {
    if (v->kind == PyObj::Kind::kNone) {
      s.devs.emplace_back();
      continue;
    }
    if (v->kind != PyObj::Kind::kDict) return bad_pickle("device entry");
    BuilderDevice dev;
    int64_t id, zone, port, region = 1, rport;
    if (!as_int(dict_get(*v, "id"), id) || !as_int(dict_get(*v, "zone"), zone) ||
        !as_int(dict_get(*v, "port"), port) || !as_str(dict_get(*v, "ip"), dev.ip) ||
        !as_str(dict_get(*v, "device"), dev.device) ||
        !as_double(dict_get(*v, "weight"), dev.weight)) {
      return bad_pickle(strprintf("device entry %zu", s.devs.size()));
    }
    if (const PyObj* r = dict_get(*v, "region"); r && !as_int(r, region)) {
      return bad_pickle("device region");
    }
    if (!as_str(dict_get(*v, "replication_ip"), dev.replication_ip)) dev.replication_ip = dev.ip;
    rport = port;
    if (const PyObj* r = dict_get(*v, "replication_port"); r && !as_int(r, rport)) {
      return bad_pickle("device replication_port");
    }
    if (!as_str(dict_get(*v, "meta"), dev.meta)) dev.meta.clear();
    dev.id = static_cast<int>(id);
    dev.region = static_cast<int>(region);
    dev.zone = static_cast<int>(zone);
    dev.port = static_cast<int>(port);
    dev.replication_port = static_cast<int>(rport);
    s.devs.emplace_back(std::move(dev));
  }
  if (const PyObj* rows = dict_get(d, "_replica2part2dev"); !is_none(rows)) {
    if (rows->kind != PyObj::Kind::kList) return bad_pickle("_replica2part2dev");
    std::vector<int64_t> vals;
    for (const PyRef& row : rows->items) {
      if (!as_int_vector(row, vals)) return bad_pickle("_replica2part2dev row");
      std::vector<uint16_t> r(vals.size());
      for (std::size_t k = 0; k < vals.size(); ++k) {
        if (vals[k] < 0 || vals[k] > 0xFFFF) return bad_pickle("device id out of range");
        r[k] = static_cast<uint16_t>(vals[k]);
      }
      s.replica2part2dev.push_back(std::move(r));
    }
  }
  if (const PyObj* moves = dict_get(d, "_last_part_moves"); !is_none(moves)) {
    std::vector<int64_t> vals;
    if (!as_int_vector(moves, vals)) return bad_pickle("_last_part_moves");
    s.last_part_moves.resize(vals.size());
    for (std::size_t k = 0; k < vals.size(); ++k) {
      s.last_part_moves[k] = static_cast<uint8_t>(std::clamp<int64_t>(vals[k], 0, 255));
    }
  }
  if (const PyObj* rm = dict_get(d, "_remove_devs"); !is_none(rm)) {
    if (rm->kind != PyObj::Kind::kList) return bad_pickle("_remove_devs");
    for (const PyRef& v : rm->items) {
      if (v->kind != PyObj::Kind::kDict || !as_int(dict_get(*v, "id"), i64)) {
        return bad_pickle("_remove_devs entry");
      }
      s.remove_devs.push_back(static_cast<int>(i64));
    }
  }
  return RingBuilder::from_state(std::move(s));
}

std::string parent_dir(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

bool is_swift_pickle_builder(std::string_view b) {
  return b.size() >= 2 && static_cast<uint8_t>(b[0]) == 0x80 && static_cast<uint8_t>(b[1]) <= 5;
}

std::string encode_builder(const BuilderState& s) {
  std::string p(kMagic, sizeof(kMagic));
  put_u32(p, kFormatVersion);
  const std::string header = header_json(s);
  put_u32(p, static_cast<uint32_t>(header.size()));
  p += header;
  for (const auto& row : s.replica2part2dev) {
    const std::size_t at = p.size();
    p.resize(at + 2 * row.size());
    for (std::size_t k = 0; k < row.size(); ++k) {
      p[at + 2 * k] = static_cast<char>(row[k] & 0xff);
      p[at + 2 * k + 1] = static_cast<char>(row[k] >> 8);
    }
  }
  const std::size_t parts = std::size_t{1} << s.part_power;
  std::string moves(parts, '\0');
  for (std::size_t k = 0; k < parts && k < s.last_part_moves.size(); ++k) {
    moves[k] = static_cast<char>(s.last_part_moves[k]);
  }
  p += moves;
  put_u32(p, static_cast<uint32_t>(
                 crc32(0, reinterpret_cast<const Bytef*>(p.data()), static_cast<uInt>(p.size()))));
  return gzip_compress(p);
}

Result<RingBuilder> decode_builder(std::string_view bytes) {
  std::string unpacked;
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
      static_cast<uint8_t>(bytes[1]) == 0x8b) {
    Result<std::string> u = gzip_decompress(bytes);
    if (!u.ok()) return Status::corruption("bad builder file: " + u.status().message());
    unpacked = std::move(*u);
    bytes = unpacked;
  }
  if (bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0) {
    return decode_apus(bytes);
  }
  if (is_swift_pickle_builder(bytes)) return decode_pickle(bytes);
  return Status::corruption("not a ring builder file (unknown magic)");
}

Result<RingBuilder> load_builder_file(const std::string& path, common::io::Fs& fs) {
  Result<std::string> bytes = fs.read_file(path, kMaxFileBytes);
  if (!bytes.ok()) {
    if (bytes.status().is_not_found()) {
      return Status::not_found("Ring Builder file does not exist: " + path);
    }
    return bytes.status();
  }
  Result<RingBuilder> b = decode_builder(*bytes);
  if (!b.ok()) return Status::corruption(path + ": " + b.status().message());
  return b;
}

Result<RingBuilder> load_builder_file(const std::string& path) {
  return load_builder_file(path, common::io::default_fs());
}

Status internal::write_file_0644(common::io::Fs& fs, const std::string& path,
                                 std::string_view data) {
  Result<common::io::File> tmp = fs.create_temp(parent_dir(path));
  if (!tmp.ok()) return tmp.status();
  const std::string tmp_path = tmp->path();
  Status s = fs.write(*tmp, data);
  if (s.ok()) s = fs.fsync(*tmp);
  // Builders and rings are read by operators' tools, like Swift's files (0644), not private.
  if (s.ok() && ::fchmod(tmp->fd(), 0644) != 0) {
    s = common::io::from_errno(errno, "fchmod " + tmp_path);
  }
  if (s.ok()) s = tmp->close();
  if (s.ok()) s = fs.durable_rename(tmp_path, path);
  if (!s.ok()) {
    fs.unlink(tmp_path).ignore();  // NotFound if the rename happened before the failure
    return s;
  }
  return Status();
}

Status save_builder_file(RingBuilder& builder, const std::string& path, common::io::Fs& fs) {
  builder.ensure_id();
  return internal::write_file_0644(fs, path, encode_builder(builder.state()));
}

Status save_builder_file(RingBuilder& builder, const std::string& path) {
  return save_builder_file(builder, path, common::io::default_fs());
}

}  // namespace apus::ring
