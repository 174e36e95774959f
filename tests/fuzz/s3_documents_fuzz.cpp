// Fuzzes the parsers of the S3 documents and headers a client sends with a request body or a
// header (proxy/s3api/tagging.h: Tagging documents and x-amz-tagging). The first byte picks
// the parser; the rest is the document.
//
// Besides the sanitizers, it checks what the operations rely on: a refusal is MalformedXML or
// InvalidTag (400); an accepted tag set is within S3's limits, and its stored form reads back
// to the same tags, sorted by key.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "proxy/s3api/tagging.h"

namespace s3 = apus::proxy::s3api;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "s3_documents_fuzz: %s\n", what);
  std::abort();
}

void check_tags(const std::variant<s3::TagSet, s3::S3Error>& parsed, size_t max_tags) {
  if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
    if (e->status != 400 || (e->code != "MalformedXML" && e->code != "InvalidTag")) {
      fail("a refusal other than MalformedXML or InvalidTag");
    }
    return;
  }
  s3::TagSet tags = std::get<s3::TagSet>(parsed);
  if (tags.size() > max_tags) fail("more tags than S3 allows");
  for (const auto& [key, value] : tags) {
    if (key.empty()) fail("an empty key accepted");
    if (key.size() > 4 * s3::kMaxTagKeyLength || value.size() > 4 * s3::kMaxTagValueLength) {
      fail("a key or value longer than S3 allows");
    }
  }
  std::string stored = s3::encode_tags(tags);
  std::sort(tags.begin(), tags.end());
  if (s3::decode_tags(stored) != tags) fail("the stored form does not read back");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      check_tags(s3::parse_tagging_xml(body, s3::TagTarget::kObject), s3::kMaxObjectTags);
      break;
    case 1:
      check_tags(s3::parse_tagging_xml(body, s3::TagTarget::kBucket), s3::kMaxBucketTags);
      break;
    default:
      check_tags(s3::parse_tagging_header(body), s3::kMaxObjectTags);
      break;
  }
  return 0;
}
