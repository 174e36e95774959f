// Reading and writing Swift's `.ring.gz` (format v1). The layout is described in ring/FORMAT.md.
//
// Writing must match Swift byte for byte, so the JSON header is produced here by hand with
// Python's json.dumps rules (sorted keys, ", " and ": ", ensure_ascii, float repr), and the gzip
// wrapper by hand around zlib's raw deflate with Python's GzipFile header fields.
//
// Reading parses the JSON header with Boost.JSON's event parser rather than its DOM: Boost 1.81
// rounds some doubles differently from Python (it is not correctly rounded), and a weight read
// one ulp off would be written back differently. Numbers are therefore re-read from their text.

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>

#include <boost/json/basic_parser_impl.hpp>
#include <sys/stat.h>
#include <zlib.h>

#include "common/io/fs.h"
#include "common/pickle.h"
#include "ring/ring_data.h"

namespace apus::ring {
namespace {

using common::Result;
using common::Status;

// Header of the uncompressed payload: magic, big-endian u16 version, big-endian u32 JSON length.
constexpr std::string_view kMagic = "R1NG";
constexpr uint16_t kFormatVersion = 1;
constexpr size_t kPrefixBytes = 10;

// Swift fixes the gzip header mtime so equal rings give equal files (RingData.save's default).
constexpr uint32_t kGzipMtime = 1300507380;
// The JSON header of a ring with 65536 devices is about 16 MiB; anything far bigger is not a
// ring header and would only make us allocate.
constexpr uint32_t kMaxJsonBytes = 256u << 20;
// A ring file is compressed; part power 24 with 8 replicas is well under this.
constexpr uint64_t kMaxRingFileBytes = 1ull << 30;
// Rows of the partition table. Real rings have a handful; the cap keeps the size arithmetic
// far from overflow.
constexpr int64_t kMaxReplicaRows = 1 << 16;
// zlib output is gathered in pieces of this size.
constexpr size_t kInflateChunk = 256 << 10;

constexpr bool kNativeLittle = std::endian::native == std::endian::little;

// ---------------------------------------------------------------------------------------------
// Python-compatible JSON output.

void append_hex4(std::string& out, uint32_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  out += kHex[(v >> 12) & 0xf];
  out += kHex[(v >> 8) & 0xf];
  out += kHex[(v >> 4) & 0xf];
  out += kHex[v & 0xf];
}

// Decodes one UTF-8 sequence at s[i]. Returns the code point and advances i, or returns -1 for
// an invalid byte (advancing i by one), as Python's surrogateescape handler sees it.
int32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len;
  uint32_t cp;
  uint32_t min;
  if ((b0 & 0xe0) == 0xc0) {
    len = 2, cp = b0 & 0x1f, min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    len = 3, cp = b0 & 0x0f, min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    ++i;
    return -1;
  }
  if (i + static_cast<size_t>(len) > s.size()) {
    ++i;
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
    if ((b & 0xc0) != 0x80) {
      ++i;
      return -1;
    }
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    ++i;
    return -1;
  }
  i += static_cast<size_t>(len);
  return static_cast<int32_t>(cp);
}

// json.dumps(s, ensure_ascii=True): printable ASCII as is, the short escapes, everything else as
// lower-case \uXXXX (UTF-16 surrogate pairs above U+FFFF). A byte that is not valid UTF-8 comes
// out as \udcXX, which is what Python writes for a name it got with surrogateescape.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const int32_t cp = next_code_point(s, i);
    if (cp < 0) {
      append_hex4(out, 0xdc00u | static_cast<uint8_t>(s[i - 1]));
      continue;
    }
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp >= 0x20 && cp <= 0x7e) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      append_hex4(out, static_cast<uint32_t>(cp));
    } else {
      const uint32_t v = static_cast<uint32_t>(cp) - 0x10000;
      append_hex4(out, 0xd800 | (v >> 10));
      append_hex4(out, 0xdc00 | (v & 0x3ff));
    }
  }
  out += '"';
}

template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// A float as json.dumps writes it: Python's repr, with NaN and infinities spelled as
// json.dumps spells them (allow_nan=True).
void append_python_float(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "NaN";
  } else if (std::isinf(d)) {
    out += d < 0 ? "-Infinity" : "Infinity";
  } else {
    out += common::pickle::python_float_repr(d);
  }
}

void append_device(std::string& out, const Device& d) {
  // Keys in sorted order, as json.dumps(sort_keys=True) emits them.
  out += "{\"device\": ";
  append_json_string(out, d.device);
  out += ", \"id\": ";
  append_int(out, d.id);
  out += ", \"ip\": ";
  append_json_string(out, d.ip);
  out += ", \"meta\": ";
  append_json_string(out, d.meta);
  out += ", \"port\": ";
  append_int(out, d.port);
  out += ", \"region\": ";
  append_int(out, d.region);
  out += ", \"replication_ip\": ";
  append_json_string(out, d.replication_ip);
  out += ", \"replication_port\": ";
  append_int(out, d.replication_port);
  out += ", \"weight\": ";
  append_python_float(out, d.weight);
  out += ", \"zone\": ";
  append_int(out, d.zone);
  out += '}';
}

std::string header_json(const RingData& ring) {
  std::string out;
  out.reserve(64 + ring.devs.size() * 200);
  out += "{\"byteorder\": ";
  out += kNativeLittle ? "\"little\"" : "\"big\"";
  out += ", \"devs\": [";
  for (size_t i = 0; i < ring.devs.size(); ++i) {
    if (i > 0) out += ", ";
    if (ring.devs[i]) {
      append_device(out, *ring.devs[i]);
    } else {
      out += "null";
    }
  }
  out += ']';
  if (ring.next_part_power) {
    out += ", \"next_part_power\": ";
    append_int(out, *ring.next_part_power);
  }
  out += ", \"part_shift\": ";
  append_int(out, ring.part_shift);
  out += ", \"replica_count\": ";
  append_int(out, ring.replica2part2dev.size());
  if (ring.version) {
    out += ", \"version\": ";
    append_int(out, *ring.version);
  }
  out += '}';
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shape checks shared by the writer (InvalidArgument) and the reader (Corruption).

// Returns an empty string when `ring` is well formed, else what is wrong with it.
std::string shape_error(const RingData& ring) {
  if (ring.part_shift < 0 || ring.part_shift > 32) {
    return "part_shift " + std::to_string(ring.part_shift) + " is outside 0..32";
  }
  const uint64_t parts = uint64_t{1} << (32 - ring.part_shift);
  const auto& rows = ring.replica2part2dev;
  for (size_t r = 0; r < rows.size(); ++r) {
    const bool may_be_short = r + 1 == rows.size() && r > 0;
    if (rows[r].size() > parts || (!may_be_short && rows[r].size() != parts)) {
      return "replica row " + std::to_string(r) + " has " + std::to_string(rows[r].size()) +
             " entries, expected " + (may_be_short ? "at most " : "") + std::to_string(parts);
    }
  }
  for (size_t i = 0; i < ring.devs.size(); ++i) {
    if (ring.devs[i] && ring.devs[i]->id != static_cast<int64_t>(i)) {
      return "device at index " + std::to_string(i) + " has id " + std::to_string(ring.devs[i]->id);
    }
  }
  // One pass over the table with a lookup of valid ids (ids are 16-bit by construction).
  std::vector<uint8_t> valid(65536, 0);
  for (size_t i = 0; i < ring.devs.size() && i < valid.size(); ++i) valid[i] = ring.devs[i] ? 1 : 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t p = 0; p < rows[r].size(); ++p) {
      if (!valid[rows[r][p]]) {
        return "replica row " + std::to_string(r) + " assigns partition " + std::to_string(p) +
               " to device id " + std::to_string(rows[r][p]) + ", which is " +
               (rows[r][p] < ring.devs.size() ? "a removed (null) device" : "not in devs");
      }
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// gzip output, as Python's GzipFile(filename, 'wb', compresslevel=9, mtime=...) produces it.

// The FNAME field: the base name, kept only if it is representable in Latin-1 (Python encodes
// the str name to Latin-1 and drops it when that fails), without a trailing ".gz".
std::string gzip_fname(std::string_view file_name) {
  const size_t slash = file_name.rfind('/');
  if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
  std::string latin1;
  size_t i = 0;
  while (i < file_name.size()) {
    const int32_t cp = next_code_point(file_name, i);
    if (cp < 0 || cp > 0xff) return {};  // not Latin-1 (an undecodable byte is U+DCxx)
    latin1 += static_cast<char>(cp);
  }
  if (latin1.size() >= 3 && latin1.compare(latin1.size() - 3, 3, ".gz") == 0) {
    latin1.resize(latin1.size() - 3);
  }
  return latin1;
}

void put_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

class GzipWriter {
 public:
  explicit GzipWriter(std::string_view fname) {
    out_ += "\x1f\x8b\x08";                 // magic, deflate
    out_ += fname.empty() ? '\0' : '\x08';  // FLG: FNAME when there is a name
    put_le32(out_, kGzipMtime);
    out_ += '\x02';  // XFL: maximum compression (level 9)
    out_ += '\xff';  // OS: unknown, as Python writes it
    if (!fname.empty()) {
      out_ += fname;
      out_ += '\0';
    }
    // Raw deflate (negative window bits), level 9, default memory level and strategy: the
    // settings of Python's zlib.compressobj in GzipFile.
    ok_ = deflateInit2(&zs_, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~GzipWriter() { deflateEnd(&zs_); }
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  bool write(const void* data, size_t size) {
    const auto* p = static_cast<const Bytef*>(data);
    crc_ = crc32_z(crc_, p, size);
    isize_ += size;
    zs_.next_in = const_cast<Bytef*>(p);
    zs_.avail_in = 0;
    while (size > 0 || zs_.avail_in > 0) {
      if (zs_.avail_in == 0) {
        const size_t n = std::min<size_t>(size, std::numeric_limits<uInt>::max());
        zs_.avail_in = static_cast<uInt>(n);
        size -= n;
      }
      if (!pump(Z_NO_FLUSH)) return false;
    }
    return true;
  }

  // Ends the deflate stream and appends the CRC-32 and size trailer.
  bool finish() {
    zs_.avail_in = 0;
    if (!pump(Z_FINISH)) return false;
    put_le32(out_, crc_);
    put_le32(out_, static_cast<uint32_t>(isize_));
    return true;
  }

  bool ok() const { return ok_; }
  std::string take() { return std::move(out_); }

 private:
  // Runs deflate until it has consumed its input (Z_NO_FLUSH) or ended the stream (Z_FINISH).
  bool pump(int flush) {
    if (!ok_) return false;
    for (;;) {
      const size_t old = out_.size();
      out_.resize(old + kInflateChunk);
      zs_.next_out = reinterpret_cast<Bytef*>(out_.data() + old);
      zs_.avail_out = static_cast<uInt>(kInflateChunk);
      const int rc = deflate(&zs_, flush);
      out_.resize(out_.size() - zs_.avail_out);
      if (rc == Z_STREAM_END) return true;
      if (rc != Z_OK && rc != Z_BUF_ERROR) return ok_ = false;
      if (flush == Z_NO_FLUSH && zs_.avail_in == 0 && zs_.avail_out != 0) return true;
    }
  }

  z_stream zs_{};
  bool ok_ = false;
  std::string out_;
  uLong crc_ = crc32_z(0, nullptr, 0);
  uint64_t isize_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Reading.

Status corrupt(std::string msg) { return Status::corruption(std::move(msg)); }

// Streams the decompressed payload out of a gzip (or zlib) image, as Swift's RingReader does
// with zlib.decompressobj(32 + MAX_WBITS).
class Inflater {
 public:
  explicit Inflater(std::string_view in) {
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs_.avail_in = static_cast<uInt>(in.size());  // callers cap the size below 4 GiB
    ok_ = inflateInit2(&zs_, 32 + MAX_WBITS) == Z_OK;
  }
  ~Inflater() { inflateEnd(&zs_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Appends decompressed bytes to out until it holds at least `want` bytes or the stream ends.
  // A damaged stream is Corruption; running out of input before the end is not an error here
  // (done() tells), so a caller can report what it was missing.
  Status fill(std::string& out, uint64_t want) {
    if (!ok_) return corrupt("cannot initialise zlib");
    while (!end_ && out.size() < want) {
      const size_t old = out.size();
      const size_t room = static_cast<size_t>(std::min<uint64_t>(kInflateChunk, want - old));
      out.resize(old + room);
      zs_.next_out = reinterpret_cast<Bytef*>(out.data() + old);
      zs_.avail_out = static_cast<uInt>(room);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      out.resize(out.size() - zs_.avail_out);
      if (rc == Z_STREAM_END) {
        end_ = true;
      } else if (rc == Z_BUF_ERROR || (rc == Z_OK && zs_.avail_in == 0 && out.size() == old)) {
        if (zs_.avail_in == 0) break;  // input exhausted: truncated
      } else if (rc != Z_OK) {
        return corrupt(std::string("not a valid gzip stream: ") +
                       (zs_.msg != nullptr ? zs_.msg : "zlib error " + std::to_string(rc)));
      }
    }
    return Status();
  }

  // Whether the compressed stream ended properly (trailer and CRC checked).
  bool done() const { return end_; }

 private:
  z_stream zs_{};
  bool ok_ = false;
  bool end_ = false;
};

// Receives Boost.JSON parse events for the header and fills a RingData, checking types as it
// goes. Unknown keys (at the top level and in devices) are skipped whatever their value.
class HeaderHandler {
 public:
  static constexpr size_t max_array_size = static_cast<size_t>(-1);
  static constexpr size_t max_object_size = static_cast<size_t>(-1);
  static constexpr size_t max_string_size = static_cast<size_t>(-1);
  static constexpr size_t max_key_size = static_cast<size_t>(-1);

  explicit HeaderHandler(RingData* ring) : ring_(ring) {}

  // What went wrong when a handler call failed; empty for a plain syntax error.
  const std::string& error() const { return error_; }
  bool has_part_shift() const { return has_part_shift_; }
  bool has_devs() const { return has_devs_; }
  int64_t replica_rows() const { return replica_rows_; }  // -1 when absent
  // "little", "big", or empty when the header did not say.
  const std::string& byteorder() const { return byteorder_; }

  using ec_t = boost::system::error_code;

  bool on_document_begin(ec_t&) { return true; }
  bool on_document_end(ec_t&) { return true; }
  bool on_comment_part(boost::json::string_view, ec_t&) { return true; }
  bool on_comment(boost::json::string_view, ec_t&) { return true; }

  bool on_object_begin(ec_t& ec) {
    switch (slot()) {
      case Slot::kDocument:
        stack_.push_back(Ctx::kTop);
        return true;
      case Slot::kDevEntry:
        ring_->devs.emplace_back(Device{});
        dev_ = DevFields{};
        stack_.push_back(Ctx::kDev);
        return true;
      case Slot::kSkip:
        stack_.push_back(Ctx::kSkip);
        return true;
      default:
        return type_error(ec, "an object");
    }
  }
  bool on_object_end(size_t, ec_t& ec) {
    const Ctx done = stack_.back();
    stack_.pop_back();
    if (done == Ctx::kDev) return finish_device(ec);
    return true;
  }
  bool on_array_begin(ec_t& ec) {
    switch (slot()) {
      case Slot::kDevs:
        has_devs_ = true;
        ring_->devs.clear();
        stack_.push_back(Ctx::kDevs);
        return true;
      case Slot::kSkip:
        stack_.push_back(Ctx::kSkip);
        return true;
      default:
        return type_error(ec, "an array");
    }
  }
  bool on_array_end(size_t, ec_t&) {
    stack_.pop_back();
    return true;
  }

  bool on_key_part(boost::json::string_view s, size_t, ec_t&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(boost::json::string_view s, size_t, ec_t&) {
    key_.append(s.data(), s.size());
    current_key_ = std::move(key_);
    key_.clear();
    return true;
  }

  bool on_string_part(boost::json::string_view s, size_t, ec_t&) {
    str_.append(s.data(), s.size());
    return true;
  }
  bool on_string(boost::json::string_view s, size_t, ec_t& ec) {
    str_.append(s.data(), s.size());
    std::string value = std::move(str_);
    str_.clear();
    switch (slot()) {
      case Slot::kByteorder:
        byteorder_ = std::move(value);
        return true;
      case Slot::kDevString: {
        Device& d = *ring_->devs.back();
        if (current_key_ == "ip") {
          d.ip = std::move(value), dev_.ip = true;
        } else if (current_key_ == "replication_ip") {
          d.replication_ip = std::move(value), dev_.replication_ip = true;
        } else if (current_key_ == "device") {
          d.device = std::move(value), dev_.device = true;
        } else {
          d.meta = std::move(value);
        }
        return true;
      }
      case Slot::kSkip:
        return true;
      default:
        return type_error(ec, "a string");
    }
  }

  bool on_number_part(boost::json::string_view s, ec_t&) {
    num_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(int64_t v, boost::json::string_view s, ec_t& ec) {
    return on_number(v, s, true, ec);
  }
  bool on_uint64(uint64_t, boost::json::string_view s, ec_t& ec) {
    return on_number(0, s, false, ec);
  }
  bool on_double(double, boost::json::string_view s, ec_t& ec) {
    return on_number(0, s, false, ec);
  }

  bool on_bool(bool, ec_t& ec) {
    if (slot() == Slot::kSkip) return true;
    return type_error(ec, "a boolean");
  }
  bool on_null(ec_t& ec) {
    switch (slot()) {
      case Slot::kDevEntry:
        ring_->devs.emplace_back(std::nullopt);
        return true;
      case Slot::kOptionalInt:
        if (current_key_ == "version")
          ring_->version.reset();
        else
          ring_->next_part_power.reset();
        return true;
      case Slot::kSkip:
        return true;
      default:
        return type_error(ec, "null");
    }
  }

 private:
  enum class Ctx { kTop, kDevs, kDev, kSkip };
  // Where the value now being parsed belongs.
  enum class Slot {
    kDocument,
    kSkip,
    kDevs,
    kDevEntry,
    kByteorder,
    kTopInt,
    kOptionalInt,
    kDevInt,
    kDevString,
    kDevWeight
  };
  struct DevFields {
    bool id = false, zone = false, ip = false, port = false, device = false;
    bool replication_ip = false, replication_port = false;
  };

  Slot slot() const {
    if (stack_.empty()) return Slot::kDocument;
    switch (stack_.back()) {
      case Ctx::kSkip:
        return Slot::kSkip;
      case Ctx::kDevs:
        return Slot::kDevEntry;
      case Ctx::kTop:
        if (current_key_ == "devs") return Slot::kDevs;
        if (current_key_ == "byteorder") return Slot::kByteorder;
        if (current_key_ == "part_shift" || current_key_ == "replica_count") return Slot::kTopInt;
        if (current_key_ == "version" || current_key_ == "next_part_power") {
          return Slot::kOptionalInt;
        }
        return Slot::kSkip;
      case Ctx::kDev:
        if (current_key_ == "id" || current_key_ == "region" || current_key_ == "zone" ||
            current_key_ == "port" || current_key_ == "replication_port") {
          return Slot::kDevInt;
        }
        if (current_key_ == "ip" || current_key_ == "replication_ip" || current_key_ == "device" ||
            current_key_ == "meta") {
          return Slot::kDevString;
        }
        if (current_key_ == "weight") return Slot::kDevWeight;
        return Slot::kSkip;
    }
    return Slot::kSkip;
  }

  std::string where() const {
    if (!stack_.empty() && stack_.back() == Ctx::kDev) {
      return "key \"" + current_key_ + "\" of device " + std::to_string(ring_->devs.size() - 1);
    }
    if (!stack_.empty() && stack_.back() == Ctx::kDevs) {
      return "device " + std::to_string(ring_->devs.size());
    }
    if (stack_.empty()) return "the header";
    return "key \"" + current_key_ + "\"";
  }

  bool fail(ec_t& ec, std::string msg) {
    error_ = std::move(msg);
    ec = boost::system::errc::make_error_code(boost::system::errc::invalid_argument);
    return false;
  }
  bool type_error(ec_t& ec, const char* got) {
    const Slot s = slot();
    const char* want = "";
    switch (s) {
      case Slot::kDocument:
        want = "an object";
        break;
      case Slot::kDevs:
        want = "a list";
        break;
      case Slot::kDevEntry:
        want = "an object or null";
        break;
      case Slot::kByteorder:
      case Slot::kDevString:
        want = "a string";
        break;
      case Slot::kTopInt:
      case Slot::kDevInt:
        want = "an integer";
        break;
      case Slot::kOptionalInt:
        want = "an integer or null";
        break;
      case Slot::kDevWeight:
        want = "a number";
        break;
      case Slot::kSkip:
        break;
    }
    return fail(ec, where() + " is " + got + ", expected " + want);
  }

  bool on_number(int64_t v, boost::json::string_view last, bool is_int64, ec_t& ec) {
    std::string text = std::move(num_);
    num_.clear();
    text.append(last.data(), last.size());
    const Slot s = slot();
    if (s == Slot::kSkip) return true;
    if (s == Slot::kDevWeight) {
      // Re-read from the text: std::from_chars rounds correctly, as Python's float() does.
      double d = 0;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
      if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
        return fail(ec, where() + " is not a usable number: " + text);
      }
      ring_->devs.back()->weight = d;
      return true;
    }
    if (s != Slot::kTopInt && s != Slot::kOptionalInt && s != Slot::kDevInt) {
      return type_error(ec, "a number");
    }
    if (!is_int64) return fail(ec, where() + " is " + text + ", expected an integer");
    if (s == Slot::kTopInt && current_key_ == "replica_count") {
      if (v < 0) return fail(ec, "replica_count is negative: " + text);
      replica_rows_ = v;
      return true;
    }
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      if (!(s == Slot::kOptionalInt && current_key_ == "version")) {
        return fail(ec, where() + " is out of range: " + text);
      }
    }
    const int iv = static_cast<int>(v);
    if (s == Slot::kTopInt) {
      ring_->part_shift = iv;
      has_part_shift_ = true;
    } else if (s == Slot::kOptionalInt) {
      if (current_key_ == "version")
        ring_->version = v;
      else
        ring_->next_part_power = iv;
    } else {
      Device& d = *ring_->devs.back();
      if (current_key_ == "id") {
        d.id = iv, dev_.id = true;
      } else if (current_key_ == "region") {
        d.region = iv;
      } else if (current_key_ == "zone") {
        d.zone = iv, dev_.zone = true;
      } else if (current_key_ == "port") {
        d.port = iv, dev_.port = true;
      } else {
        d.replication_port = iv, dev_.replication_port = true;
      }
    }
    return true;
  }

  bool finish_device(ec_t& ec) {
    const size_t index = ring_->devs.size() - 1;
    Device& d = *ring_->devs.back();
    const char* missing = !dev_.id       ? "id"
                          : !dev_.zone   ? "zone"
                          : !dev_.ip     ? "ip"
                          : !dev_.port   ? "port"
                          : !dev_.device ? "device"
                                         : nullptr;
    if (missing != nullptr) {
      return fail(ec, "device " + std::to_string(index) + " has no \"" + missing + "\"");
    }
    // Rings written before replication networks existed have neither key (Swift's Ring fills
    // them in the same way).
    if (!dev_.replication_ip) d.replication_ip = d.ip;
    if (!dev_.replication_port) d.replication_port = d.port;
    return true;
  }

  RingData* ring_;
  std::vector<Ctx> stack_;
  std::string current_key_;
  std::string key_;  // a key being received in parts
  std::string str_;  // a string value being received in parts
  std::string num_;  // a number being received in parts
  DevFields dev_;
  std::string error_;
  std::string byteorder_;
  bool has_part_shift_ = false;
  bool has_devs_ = false;
  int64_t replica_rows_ = -1;
};

Status parse_header(std::string_view json, boost::json::basic_parser<HeaderHandler>* parser) {
  boost::system::error_code ec;
  const size_t used = parser->write_some(false, json.data(), json.size(), ec);
  if (ec) {
    const std::string& why = parser->handler().error();
    if (!why.empty()) return corrupt("bad JSON header: " + why);
    return corrupt("bad JSON header: " + ec.message() + " at byte " + std::to_string(used));
  }
  return Status();
}

uint16_t byteswap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }

}  // namespace

double RingData::replica_count() const {
  if (replica2part2dev.empty() || replica2part2dev.front().empty()) return 0.0;
  return static_cast<double>(replica2part2dev.size() - 1) +
         static_cast<double>(replica2part2dev.back().size()) /
             static_cast<double>(replica2part2dev.front().size());
}

Result<RingData> decode_ring(std::string_view file_bytes) {
  if (file_bytes.size() > std::numeric_limits<uInt>::max()) {
    return corrupt("file too large for a ring (" + std::to_string(file_bytes.size()) + " bytes)");
  }
  Inflater inflater(file_bytes);
  std::string raw;
  APUS_RETURN_IF_ERROR(inflater.fill(raw, kPrefixBytes));
  if (raw.size() < kMagic.size() || std::string_view(raw).substr(0, 4) != kMagic) {
    if (raw.size() < kMagic.size() && !inflater.done()) {
      return corrupt("truncated: the file ends inside the ring header");
    }
    return corrupt("bad magic: not an R1NG ring file (pickled pre-1.7 rings are not supported)");
  }
  if (raw.size() < kPrefixBytes) {
    return corrupt(inflater.done() ? "ring header too short"
                                   : "truncated: the file ends inside the ring header");
  }
  const auto* u = reinterpret_cast<const uint8_t*>(raw.data());
  const uint16_t version = static_cast<uint16_t>((u[4] << 8) | u[5]);
  if (version != kFormatVersion) {
    return corrupt("unsupported ring format version " + std::to_string(version) +
                   " (only version 1 is supported)");
  }
  const uint32_t json_len =
      (uint32_t{u[6]} << 24) | (uint32_t{u[7]} << 16) | (uint32_t{u[8]} << 8) | uint32_t{u[9]};
  if (json_len > kMaxJsonBytes) {
    return corrupt("JSON header length " + std::to_string(json_len) + " is implausibly large");
  }
  APUS_RETURN_IF_ERROR(inflater.fill(raw, kPrefixBytes + json_len));
  if (raw.size() < kPrefixBytes + json_len) {
    return corrupt(inflater.done() ? "the JSON header is shorter than its declared length"
                                   : "truncated: the file ends inside the JSON header");
  }

  RingData ring;
  boost::json::basic_parser<HeaderHandler> parser(boost::json::parse_options{}, &ring);
  APUS_RETURN_IF_ERROR(parse_header(std::string_view(raw).substr(kPrefixBytes, json_len), &parser));
  const HeaderHandler* header = &parser.handler();
  if (!header->has_devs()) return corrupt("bad JSON header: no \"devs\"");
  if (!header->has_part_shift()) return corrupt("bad JSON header: no \"part_shift\"");
  if (header->replica_rows() < 0) return corrupt("bad JSON header: no \"replica_count\"");
  if (ring.part_shift < 0 || ring.part_shift > 32) {
    return corrupt("bad JSON header: part_shift " + std::to_string(ring.part_shift) +
                   " is outside 0..32");
  }
  if (header->replica_rows() > kMaxReplicaRows) {
    return corrupt("bad JSON header: replica_count " + std::to_string(header->replica_rows()) +
                   " is implausibly large");
  }
  bool swap = false;
  if (!header->byteorder().empty()) {
    if (header->byteorder() != "little" && header->byteorder() != "big") {
      return corrupt("bad JSON header: byteorder \"" + header->byteorder() + "\"");
    }
    swap = (header->byteorder() == "little") != kNativeLittle;
  }

  // The partition table. Fill the buffer as data arrives rather than reserving what the header
  // claims, so a truncated file claiming a huge table costs only what it holds.
  const uint64_t rows = static_cast<uint64_t>(header->replica_rows());
  const uint64_t parts = uint64_t{1} << (32 - ring.part_shift);
  const uint64_t table_bytes = rows * parts * 2;
  raw.erase(0, kPrefixBytes + json_len);
  // One byte more than the table, to notice data after it.
  APUS_RETURN_IF_ERROR(inflater.fill(raw, table_bytes + 1));
  if (!inflater.done()) {
    if (raw.size() > table_bytes) {
      return corrupt("unexpected data after the partition table");
    }
    return corrupt("truncated: the gzip stream ends early (" + std::to_string(raw.size()) +
                   " of up to " + std::to_string(table_bytes) + " table bytes)");
  }
  if (raw.size() > table_bytes) {
    return corrupt("unexpected data after the partition table (" +
                   std::to_string(raw.size() - table_bytes) + " bytes)");
  }
  if (raw.size() % 2 != 0) return corrupt("the partition table has an odd number of bytes");

  // Every row but the last is full; the last may be short (fractional replicas).
  const uint64_t entries = raw.size() / 2;
  ring.replica2part2dev.resize(static_cast<size_t>(rows));
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t begin = r * parts;
    const uint64_t have = begin < entries ? std::min(parts, entries - begin) : 0;
    if (have < parts && (r + 1 < rows || r == 0)) {
      return corrupt("partition table too short: replica row " + std::to_string(r) + " has " +
                     std::to_string(have) + " of " + std::to_string(parts) + " entries");
    }
    auto& row = ring.replica2part2dev[static_cast<size_t>(r)];
    row.resize(static_cast<size_t>(have));
    if (have == 0) continue;  // an empty last row
    std::memcpy(row.data(), raw.data() + begin * 2, static_cast<size_t>(have) * 2);
    if (swap) {
      for (auto& v : row) v = byteswap16(v);
    }
  }
  raw.clear();
  raw.shrink_to_fit();

  if (std::string err = shape_error(ring); !err.empty()) return corrupt(err);
  return ring;
}

std::string ring_header_json_for_test(const RingData& ring) { return header_json(ring); }

Status validate_ring_data(const RingData& ring) {
  if (std::string err = shape_error(ring); !err.empty()) return Status::invalid_argument(err);
  return Status();
}

Result<std::string> encode_ring(const RingData& ring, std::string_view file_name) {
  if (std::string err = shape_error(ring); !err.empty()) {
    return Status::invalid_argument("cannot write ring: " + err);
  }
  const std::string json = header_json(ring);
  std::string prefix(kMagic);
  prefix += static_cast<char>(kFormatVersion >> 8);
  prefix += static_cast<char>(kFormatVersion & 0xff);
  const auto len = static_cast<uint32_t>(json.size());
  for (int shift = 24; shift >= 0; shift -= 8) prefix += static_cast<char>((len >> shift) & 0xff);

  GzipWriter gz(gzip_fname(file_name));
  bool ok = gz.ok() && gz.write(prefix.data(), prefix.size()) && gz.write(json.data(), json.size());
  // Rows go out in native byte order, which the header names.
  for (const auto& row : ring.replica2part2dev) {
    if (!ok) break;
    ok = gz.write(row.data(), row.size() * sizeof(uint16_t));
  }
  if (!ok || !gz.finish()) return Status::io_error("cannot write ring: zlib deflate failed");
  return gz.take();
}

Result<RingData> load_ring_file(const std::string& path, common::io::Fs& fs) {
  Result<common::io::File> file = fs.open_read(path);
  if (!file.ok()) return file.status();
  Result<common::io::FileStat> st = fs.fstat(*file);
  if (!st.ok()) return st.status();
  if (st->size > kMaxRingFileBytes) {
    return corrupt("ring file " + path + ": too large (" + std::to_string(st->size) + " bytes)");
  }
  std::string data(static_cast<size_t>(st->size), '\0');
  size_t have = 0;
  for (;;) {
    if (have == data.size()) data.resize(have + (have < (1 << 20) ? (1 << 20) : have));
    Result<size_t> n =
        fs.pread(*file, have, std::span<char>(data.data() + have, data.size() - have));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    have += *n;
    if (have > kMaxRingFileBytes) {
      return corrupt("ring file " + path + ": too large (over " +
                     std::to_string(kMaxRingFileBytes) + " bytes)");
    }
  }
  data.resize(have);
  Result<RingData> ring = decode_ring(data);
  if (!ring.ok()) {
    const Status& s = ring.status();
    return Status::corruption("ring file " + path + ": " + s.message());
  }
  return ring;
}

Result<RingData> load_ring_file(const std::string& path) {
  return load_ring_file(path, common::io::default_fs());
}

Status write_ring_file(const RingData& ring, const std::string& path, common::io::Fs& fs) {
  Result<std::string> bytes = encode_ring(ring, path);
  if (!bytes.ok()) return bytes.status();
  // As Swift's RingData.save: a temp file beside the target, fsynced, mode 0644, renamed.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  Result<common::io::File> tmp = fs.create_temp(dir);
  if (!tmp.ok()) return tmp.status();
  const std::string tmp_path = tmp->path();
  Status s = fs.write(*tmp, *bytes);
  if (s.ok() && ::fchmod(tmp->fd(), 0644) != 0) {
    s = common::io::from_errno(errno, "fchmod " + tmp_path);
  }
  if (s.ok()) s = fs.fsync(*tmp);
  if (s.ok()) s = tmp->close();
  if (s.ok()) s = fs.durable_rename(tmp_path, path);
  if (!s.ok()) {
    // The temp name is ours until the rename succeeded; after a failed rename it still is.
    common::io::FileStat gone;
    if (Result<common::io::FileStat> t = fs.stat(tmp_path); t.ok()) gone = *t;
    if (gone.exists) fs.unlink(tmp_path).ignore();
  }
  return s;
}

Status write_ring_file(const RingData& ring, const std::string& path) {
  return write_ring_file(ring, path, common::io::default_fs());
}

}  // namespace apus::ring
