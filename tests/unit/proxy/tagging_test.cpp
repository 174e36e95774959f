// S3 tags (proxy/s3api/tagging.h): S3's limits on a tag set (count, characters not bytes,
// duplicates, the aws: prefix), the Tagging document and x-amz-tagging forms, and the stored
// form that must give back exactly what went in, sorted by key.
#include "proxy/s3api/tagging.h"

#include <doctest/doctest.h>

#include <string>
#include <variant>

namespace {

using apus::proxy::s3api::decode_tags;
using apus::proxy::s3api::encode_tags;
using apus::proxy::s3api::parse_tagging_header;
using apus::proxy::s3api::parse_tagging_xml;
using apus::proxy::s3api::S3Error;
using apus::proxy::s3api::tagging_document;
using apus::proxy::s3api::TagSet;
using apus::proxy::s3api::TagTarget;

std::string document(int n, const std::string& key = "k", const std::string& value = "v") {
  std::string body = "<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet>";
  for (int i = 0; i < n; ++i) {
    body += "<Tag><Key>" + key + std::to_string(i) + "</Key><Value>" + value + "</Value></Tag>";
  }
  return body + "</TagSet></Tagging>";
}

std::string error_code(const std::variant<TagSet, S3Error>& v) {
  const auto* e = std::get_if<S3Error>(&v);
  return e ? e->code : "";
}

}  // namespace

TEST_CASE("tagging: a document's tags, in order") {
  auto v = parse_tagging_xml(document(3), TagTarget::kObject);
  REQUIRE(std::holds_alternative<TagSet>(v));
  CHECK(std::get<TagSet>(v) == TagSet{{"k0", "v"}, {"k1", "v"}, {"k2", "v"}});
  auto empty = parse_tagging_xml("<Tagging><TagSet/></Tagging>", TagTarget::kObject);
  REQUIRE(std::holds_alternative<TagSet>(empty));
  CHECK(std::get<TagSet>(empty).empty());
  auto blank = parse_tagging_xml("<Tagging><TagSet><Tag><Key>a</Key><Value/></Tag></TagSet></Tagging>",
                                 TagTarget::kObject);
  REQUIRE(std::holds_alternative<TagSet>(blank));
  CHECK(std::get<TagSet>(blank) == TagSet{{"a", ""}});
}

TEST_CASE("tagging: documents of another shape are MalformedXML") {
  for (const char* body : {"", "<Tagging>", "<Other><TagSet/></Other>", "<Tagging/>",
                           "<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
                           "<Tagging><TagSet><Tag><Value>a</Value></Tag></TagSet></Tagging>",
                           "<Tagging><TagSet><Other/></TagSet></Tagging>"}) {
    CAPTURE(body);
    CHECK(error_code(parse_tagging_xml(body, TagTarget::kObject)) == "MalformedXML");
  }
}

TEST_CASE("tagging: S3's limits") {
  CHECK(error_code(parse_tagging_xml(document(10), TagTarget::kObject)).empty());
  CHECK(error_code(parse_tagging_xml(document(11), TagTarget::kObject)) == "InvalidTag");
  CHECK(error_code(parse_tagging_xml(document(50), TagTarget::kBucket)).empty());
  CHECK(error_code(parse_tagging_xml(document(51), TagTarget::kBucket)) == "InvalidTag");
  CHECK(error_code(parse_tagging_xml(document(5000), TagTarget::kBucket)) == "InvalidTag");
  // Keys up to 128 characters (the index makes them one longer), values up to 256; "é" is two
  // bytes and one character.
  std::string e2 = "\xc3\xa9";
  std::string key127, value256;
  for (int i = 0; i < 127; ++i) key127 += e2;
  for (int i = 0; i < 256; ++i) value256 += e2;
  CHECK(error_code(parse_tagging_xml(document(1, key127, value256), TagTarget::kObject)).empty());
  CHECK(error_code(parse_tagging_xml(document(1, key127 + "x", "v"), TagTarget::kObject)) ==
        "InvalidTag");
  CHECK(error_code(parse_tagging_xml(document(1, "k", value256 + "x"), TagTarget::kObject)) ==
        "InvalidTag");
  CHECK(error_code(parse_tagging_xml(document(1, "aws:k"), TagTarget::kObject)) == "InvalidTag");
  CHECK(error_code(parse_tagging_xml(
            "<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>"
            "<Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>",
            TagTarget::kObject)) == "InvalidTag");
  CHECK(error_code(parse_tagging_xml(
            "<Tagging><TagSet><Tag><Key></Key><Value>1</Value></Tag></TagSet></Tagging>",
            TagTarget::kObject)) == "InvalidTag");
}

TEST_CASE("tagging: a set too long to keep in one header is refused") {
  // 50 tags of 128 and 256 ASCII characters: S3's limits, but ~19 KB stored.
  std::string key(127, 'k'), value(256, 'v');
  CHECK(error_code(parse_tagging_xml(document(50, key, value), TagTarget::kBucket)) ==
        "InvalidTag");
  // 10 object tags of 128 and 256 ASCII characters fit.
  CHECK(error_code(parse_tagging_xml(document(10, key, value), TagTarget::kObject)).empty());
}

TEST_CASE("tagging: the x-amz-tagging header") {
  auto v = parse_tagging_header("a=1&b=two%20words&c=&d+e=f%26g");
  REQUIRE(std::holds_alternative<TagSet>(v));
  CHECK(std::get<TagSet>(v) == TagSet{{"a", "1"}, {"b", "two words"}, {"c", ""}, {"d e", "f&g"}});
  CHECK(error_code(parse_tagging_header("a=1&a=2")) == "InvalidTag");
  CHECK(error_code(parse_tagging_header("%FF=1")) == "InvalidTag");  // not UTF-8
  std::string eleven;
  for (int i = 0; i < 11; ++i) eleven += "k" + std::to_string(i) + "=v&";
  CHECK(error_code(parse_tagging_header(eleven)) == "InvalidTag");
}

TEST_CASE("tagging: the stored form gives back what went in") {
  TagSet tags{{"a b", "c=d&e"}, {"\xc3\xa9", ""}, {"%41", "+"}, {"k", "v"}};
  std::string stored = encode_tags(tags);
  CHECK(stored.find(' ') == std::string::npos);
  // Sorted by key (bytes).
  CHECK(decode_tags(stored) == TagSet{{"%41", "+"}, {"a b", "c=d&e"}, {"k", "v"}, {"\xc3\xa9", ""}});
  CHECK(encode_tags({}).empty());
  CHECK(decode_tags("").empty());
  // What does not decode is skipped.
  CHECK(decode_tags("=x&&a=1&b") == TagSet{{"a", "1"}});
}

TEST_CASE("tagging: the answer document") {
  std::string doc = tagging_document({{"a<", "&b"}});
  CHECK(doc.find("<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet><Tag>"
                 "<Key>a&lt;</Key><Value>&amp;b</Value></Tag></TagSet></Tagging>") !=
        std::string::npos);
}
