// S3 tags (object and bucket tagging): what a tag set may hold, how one is read from a
// Tagging document or an x-amz-tagging header, and how it is kept in Swift metadata.
//
// Swift's s3api keeps no tags (GET answers an empty set, PUT is NotImplemented); Apus keeps
// them in metadata that Swift carries along untouched, so a mixed cluster keeps them too:
// - an object's in X-Object-Transient-Sysmeta-S3api-Tagging (transient sysmeta is the only
//   object metadata a POST may change besides user metadata);
// - a bucket's in X-Container-Sysmeta-S3api-Tagging.
// Both hold the set as "key=value&key=value", each key and value percent-encoded (every byte
// but ASCII letters, digits and "_.-~"), sorted by key: a set has no order, and S3 servers
// answer tags sorted so (RGW, and clients' tests written against it).
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

inline constexpr std::string_view kObjectTaggingSysmeta = "X-Object-Transient-Sysmeta-S3api-Tagging";
inline constexpr std::string_view kBucketTaggingSysmeta = "X-Container-Sysmeta-S3api-Tagging";

// S3's limits: tags per object and per bucket, characters (not bytes) per key and value.
inline constexpr size_t kMaxObjectTags = 10;
inline constexpr size_t kMaxBucketTags = 50;
inline constexpr size_t kMaxTagKeyLength = 128;
inline constexpr size_t kMaxTagValueLength = 256;

// The most a stored tag set may take: it travels as one header to the storage servers, whose
// header lines (Swift's max_header_size) end at 8192 bytes with the name. S3 allows more for
// bucket tags (50 of 128 and 256 characters) and for non-ASCII object tags; a set whose stored
// form is longer is refused (InvalidTag), never stored cut or answered with the backend's 400.
inline constexpr size_t kMaxStoredTagsBytes = 8000;

using TagSet = std::vector<std::pair<std::string, std::string>>;

enum class TagTarget { kObject, kBucket };

// The tags of a PutObjectTagging or PutBucketTagging document
// (<Tagging><TagSet><Tag><Key/><Value/></Tag>...</TagSet></Tagging>), checked against S3's
// rules; MalformedXML for a document of another shape, InvalidTag for a set S3 refuses.
std::variant<TagSet, S3Error> parse_tagging_xml(std::string_view body, TagTarget target);

// The tags of an x-amz-tagging header (a URL query: "k1=v1&k2=v2"), checked the same way.
std::variant<TagSet, S3Error> parse_tagging_header(std::string_view value);

// The stored form of `tags` (see above); "" for none.
std::string encode_tags(TagSet tags);
// The tags of a stored value; what does not decode is skipped, never an error.
TagSet decode_tags(std::string_view stored);

// <Tagging><TagSet>...</TagSet></Tagging>, as S3 answers GetObjectTagging.
std::string tagging_document(const TagSet& tags);

}  // namespace apus::proxy::s3api
