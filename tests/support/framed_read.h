// A driver of common/http/body_framing.h's BodyFraming for tests and the fuzzer: reads a body
// as internal::read_framed_body() does, framing parsed from what has arrived and body bytes
// taken as they come, with the input arriving `step` bytes at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/http/body_framing.h"

namespace apus::test {

struct FramedRead {
  enum class End { kDone, kFailed, kWaiting };
  End end = End::kWaiting;
  std::string body;
  size_t consumed = 0;  // bytes of the input taken as the message's (framing and body)
  std::string broken;   // an invariant BodyFraming broke (empty: none)
  bool operator==(const FramedRead&) const = default;
};

// With `peer_closes`, the input's end is the connection's (peer_closed()); without, the read
// ends kWaiting when the input ends before the body does.
inline FramedRead read_framed(common::http::BodyFraming framing, std::string_view input,
                              size_t step, bool peer_closes) {
  FramedRead out;
  std::string buffer;
  size_t arrived = 0;
  for (;;) {
    for (;;) {
      const size_t used = framing.parse(buffer);
      if (used > buffer.size()) {
        out.broken = "parse() consumed more than it was given";
        return out;
      }
      buffer.erase(0, used);
      out.consumed += used;
      const size_t take =
          static_cast<size_t>(std::min<uint64_t>(framing.data_ahead(), buffer.size()));
      if (take == 0) break;
      out.body.append(buffer, 0, take);
      buffer.erase(0, take);
      framing.took(take);
      out.consumed += take;
    }
    if (!framing.done() && !framing.failed() && arrived == input.size()) {
      if (!peer_closes) return out;
      framing.peer_closed();
    }
    if (framing.done() || framing.failed()) {
      out.end = framing.done() ? FramedRead::End::kDone : FramedRead::End::kFailed;
      return out;
    }
    const size_t n = std::min(step, input.size() - arrived);
    buffer.append(input.substr(arrived, n));
    arrived += n;
  }
}

}  // namespace apus::test
