// A driver of common/http/mime.h's MimeSplitter for tests and the fuzzer: reads an input `chunk`
// bytes at a time and collects each document's body, either feeding every byte or, with
// `in_place`, reading the first document's body as the object server's PutBody does (into its
// own buffer, behind the tail take_body_tail() hands back, cut by body_in_place()). Both ways
// must give the same documents and the same outcome.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/mime.h"

namespace apus::test {

struct MimeOutcome {
  std::vector<std::string> bodies;  // each document's body, in order
  bool error = false;               // the splitter refused the input
  std::string broken;               // an invariant the splitter broke (empty: none)
  bool operator==(const MimeOutcome&) const = default;
};

inline MimeOutcome split_mime(std::string_view input, std::string_view boundary, size_t chunk,
                              bool in_place) {
  using common::http::MimeSplitter;
  MimeSplitter s(boundary);
  size_t fed = 0;
  auto more = [&](size_t n) {
    n = std::min(n, input.size() - fed);
    std::string_view got = input.substr(fed, n);
    fed += n;
    return got;
  };
  MimeOutcome out;
  bool in_first_body = false;
  // PutBody takes the in-place path with a buffer of at least two delimiters.
  const size_t room = std::max(chunk, 2 * s.delimiter_size());
  for (int guard = 0; guard < 10000000; ++guard) {
    if (in_place && in_first_body) {
      if (auto tail = s.take_body_tail()) {
        if (tail->size() >= s.delimiter_size()) out.broken = "the tail holds a whole delimiter";
        std::string buf(*tail);
        std::string_view fresh = more(room - buf.size());
        if (fresh.empty()) {
          s.feed(buf);
          s.finish();
        } else {
          buf += fresh;
          size_t body = s.body_in_place(buf);
          if (body > buf.size()) out.broken = "body_in_place beyond its region";
          out.bodies.back() += buf.substr(0, std::min(body, buf.size()));
        }
        continue;
      }
    }
    switch (s.next()) {
      case MimeSplitter::Event::kNeedMore:
        if (fed >= input.size()) {
          s.finish();
        } else {
          s.feed(more(chunk));
        }
        break;
      case MimeSplitter::Event::kHeaders:
        out.bodies.emplace_back();
        in_first_body = out.bodies.size() == 1;
        break;
      case MimeSplitter::Event::kData:
        if (out.bodies.empty()) {
          out.broken = "data outside a document";
          return out;
        }
        out.bodies.back() += s.data();
        break;
      case MimeSplitter::Event::kEndOfDocument:
        in_first_body = false;
        break;
      case MimeSplitter::Event::kEnd:
        return out;
      case MimeSplitter::Event::kError:
        out.error = true;
        return out;
    }
  }
  out.broken = "the splitter never ended";
  return out;
}

}  // namespace apus::test
