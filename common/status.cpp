#include "common/status.h"

#include <cstdio>
#include <cstdlib>

namespace apus::common {

namespace {
const char* code_name(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kNotFound: return "NotFound";
    case Status::Code::kConflict: return "Conflict";
    case Status::Code::kPreconditionFailed: return "PreconditionFailed";
    case Status::Code::kInsufficientStorage: return "InsufficientStorage";
    case Status::Code::kTimeout: return "Timeout";
    case Status::Code::kIOError: return "IOError";
    case Status::Code::kCorruption: return "Corruption";
    case Status::Code::kInvalidArgument: return "InvalidArgument";
    case Status::Code::kUnavailable: return "Unavailable";
    case Status::Code::kCancelled: return "Cancelled";
  }
  return "Unknown";
}
}  // namespace

std::string Status::to_string() const {
  std::string out = code_name(code_);
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

int to_http_status(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk: return 200;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kConflict: return 409;
    case Status::Code::kPreconditionFailed: return 412;
    case Status::Code::kInsufficientStorage: return 507;
    // Swift answers 408 when a client stalls mid-body; peers that time out become 503 at the
    // proxy, which maps them itself because only it knows which side timed out.
    case Status::Code::kTimeout: return 408;
    case Status::Code::kIOError: return 500;
    case Status::Code::kCorruption: return 500;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kUnavailable: return 503;
    // The client is gone; 499 is what Swift's access log records for a disconnect.
    case Status::Code::kCancelled: return 499;
  }
  return 500;
}

void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "APUS_CHECK failed: %s at %s:%d\n", expr, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace apus::common
