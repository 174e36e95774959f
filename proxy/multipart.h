// A bounded, streaming reader of multipart/form-data bodies as Swift's formpost reads them
// (swift.common.utils iter_multipart_mime_documents, parse_mime_headers and
// parse_content_disposition), for input a client controls.
//
// The body is cut into parts at each "\r\n--<boundary>"; the two bytes after that delimiter are
// skipped, and "--" there means no part follows. The first boundary line may follow blank
// lines; the end of the input ends the current part and the form (a missing closing boundary
// is not an error, as in Swift). A part's headers are its lines up to a blank line (a line
// ends at "\r\n" unless that starts the delimiter), read as Python's email parser reads them.
//
// Memory is bounded whatever the input: the parser holds at most kBufferCapacity bytes of
// input (plus the boundary), a part's header block may not exceed kMaxHeaderBytes (Swift has
// no limit there; past it the form is refused), and data is handed out as it is found. The
// answers do not depend on how the input is split into feed() calls (Swift's own parser can
// miss a delimiter that straddles its 4096-byte read of a header line; this one does not).
//
// Parser is thread-compatible; the free functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace apus::proxy::multipart {

// Input held at most, besides the delimiter's length.
inline constexpr size_t kBufferCapacity = 128 * 1024;
// A part's header block (its lines, blank line included) at most.
inline constexpr size_t kMaxHeaderBytes = 64 * 1024;

class Parser {
 public:
  enum class Step {
    kNeedMore,  // feed() more input (or finish()) and ask again
    kReady,     // the call produced its result
    kEnd,       // read_data(): the part has no more data
    kInvalid,   // start(): the first line is not the boundary
    kTooLong,   // read_headers(): the header block exceeds kMaxHeaderBytes
  };

  // `boundary` as the Content-Type's boundary parameter gives it (without "--").
  explicit Parser(std::string_view boundary);

  // Bytes feed() may take now (0 only while a result is ready to be taken).
  size_t room() const;
  // Appends input. REQUIRES: data.size() <= room(), finish() not called.
  void feed(std::string_view data);
  // The input has ended.
  void finish() { eof_ = true; }
  bool finished() const { return eof_; }

  // Skips lines that are exactly "\r\n", then reads the first boundary line (up to the
  // boundary's length + 2 bytes or a '\n'): kReady when it is "--<boundary>" once surrounding
  // whitespace is stripped, else kInvalid. Call once, first.
  Step start();

  // The raw header lines of the current part, as Swift's parse_mime_headers() reads them (the
  // blank line that ends them included). kTooLong when they exceed kMaxHeaderBytes. After
  // kReady, read_data() gives the part's body.
  Step read_headers(std::vector<std::string>* lines);

  // Up to `max` (> 0) bytes of the current part's body in *out (valid until the next call),
  // or kEnd once the part is over.
  Step read_data(size_t max, std::string_view* out);

  // After kEnd: whether another part follows (then read_headers() again).
  bool more_parts() const { return more_; }

  // Input bytes held now (tests and the fuzzer check the bound).
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string_view pending() const { return std::string_view(buf_).substr(pos_); }
  void consume(size_t n);
  // Ends the current part at a delimiter found at offset `at` of pending(): kNeedMore until
  // the two bytes after it (or the end of input) are there.
  Step end_part_at(size_t at);

  enum class State {
    kStart,    // before start()
    kHeaders,  // reading a part's header lines
    kBody,     // reading a part's data
    kBetween,  // a part ended and another follows
    kDone,     // no part follows
  };

  std::string delim_;  // "\r\n--" + boundary
  std::string buf_;
  size_t pos_ = 0;     // consumed bytes at the front of buf_
  size_t clean_ = 0;   // index in buf_ before which no delimiter starts
  State state_ = State::kStart;
  std::vector<std::string> header_lines_;  // of the part being read
  size_t header_bytes_ = 0;
  bool eof_ = false;
  bool part_over_ = false;  // the current part's delimiter (or the input's end) was reached
  bool more_ = true;
};

// Swift's parse_mime_headers() on the raw lines read_headers() gave: each line decoded as
// UTF-8 (Latin-1 when it is not), the block read by Python's email parser (continuation lines,
// a line that is no header ends the block) and the fields keyed as HeaderKeyDict keys them:
// title-cased names, the first value of a name kept. Values are UTF-8.
class MimeHeaders {
 public:
  static MimeHeaders parse(const std::vector<std::string>& lines);
  // The value of `name` (any case), or nullopt.
  std::optional<std::string> get(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // title-cased name, value
};

// Swift's parse_content_disposition(): the value before the first ';' (stripped only when
// there is one) and the key=value attributes after it (quotes stripped; a later key wins).
struct Disposition {
  std::string type;
  std::map<std::string, std::string> attrs;
};
Disposition parse_content_disposition(std::string_view header);

// Whether `s` is valid UTF-8 as Python's strict decoder sees it (no surrogates, no overlong
// forms, nothing past U+10FFFF).
bool valid_utf8(std::string_view s);

// `s` (Latin-1 bytes) encoded as UTF-8.
std::string latin1_to_utf8(std::string_view s);

}  // namespace apus::proxy::multipart
