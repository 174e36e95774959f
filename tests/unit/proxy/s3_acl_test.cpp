// S3 ACLs (proxy/s3api/s3_acl.h): the stored form byte for byte as Swift's s3api writes it
// (values taken from Swift 2.30.1's encode_acl()), Swift's canned ACLs, the headers and the
// AccessControlPolicy document a client sends, and who each ACL lets in.
#include "proxy/s3api/s3_acl.h"

#include <doctest/doctest.h>

#include <string>
#include <variant>

namespace {

using apus::common::http::HeaderMap;
using apus::proxy::s3api::Acl;
using apus::proxy::s3api::acl_document;
using apus::proxy::s3api::acl_from_headers;
using apus::proxy::s3api::canned_acl;
using apus::proxy::s3api::decode_acl;
using apus::proxy::s3api::encode_acl;
using apus::proxy::s3api::Grant;
using apus::proxy::s3api::GranteeKind;
using apus::proxy::s3api::parse_acl_document;
using apus::proxy::s3api::Permission;
using apus::proxy::s3api::permits;
using apus::proxy::s3api::S3Error;

const std::string kPublicReadWrite =
    R"({"Owner":"test:tester","Grant":[{"Permission":"READ","Grantee":"AllUsers"},)"
    R"({"Permission":"WRITE","Grantee":"AllUsers"},)"
    R"({"Permission":"FULL_CONTROL","Grantee":"test:tester"}]})";

std::string policy(const std::string& owner, const std::string& grants) {
  return "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>" +
         owner + "</ID></Owner><AccessControlList>" + grants +
         "</AccessControlList></AccessControlPolicy>";
}

std::string user_grant(const std::string& id, const std::string& permission) {
  return "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
         "xsi:type=\"CanonicalUser\"><ID>" + id + "</ID></Grantee><Permission>" + permission +
         "</Permission></Grant>";
}

std::string code_of(const std::variant<Acl, S3Error>& v) {
  const auto* e = std::get_if<S3Error>(&v);
  return e ? e->code : "";
}

}  // namespace

TEST_CASE("s3_acl: a canned ACL is stored as Swift's s3api stores it") {
  auto acl = canned_acl("public-read-write", "test:tester", "test:tester");
  REQUIRE(acl);
  CHECK(encode_acl(*acl) == kPublicReadWrite);
  auto back = decode_acl(kPublicReadWrite);
  REQUIRE(back);
  CHECK(*back == *acl);
  CHECK(back->grants[0].kind == GranteeKind::kAllUsers);
  CHECK(back->grants[2].user == "test:tester");
}

TEST_CASE("s3_acl: canned ACLs name the bucket owner where S3 says") {
  auto read = canned_acl("bucket-owner-read", "owner:b", "writer:w");
  REQUIRE(read);
  CHECK(read->owner == "writer:w");
  CHECK(read->grants == std::vector<Grant>{
                            {GranteeKind::kUser, "owner:b", Permission::kRead},
                            {GranteeKind::kUser, "writer:w", Permission::kFullControl}});
  auto full = canned_acl("bucket-owner-full-control", "owner:b", "writer:w");
  REQUIRE(full);
  CHECK(permits(*full, "owner:b", Permission::kWriteAcp));
  CHECK_FALSE(canned_acl("public", "a:b", "a:b"));
}

TEST_CASE("s3_acl: what is not a stored ACL counts as none") {
  CHECK_FALSE(decode_acl(""));
  CHECK_FALSE(decode_acl("not json"));
  CHECK_FALSE(decode_acl("[1,2]"));
  CHECK_FALSE(decode_acl(R"({"Owner":"a","Grant":[{"Permission":"ALL","Grantee":"b"}]})"));
  auto no_owner = decode_acl(R"({"Grant":[]})");
  REQUIRE(no_owner);
  CHECK(no_owner->owner.empty());
}

TEST_CASE("s3_acl: the owner may do anything, others what they are granted") {
  auto acl = decode_acl(
      R"({"Owner":"a:a","Grant":[{"Permission":"READ","Grantee":"b:b"},)"
      R"({"Permission":"WRITE_ACP","Grantee":"AuthenticatedUsers"}]})");
  REQUIRE(acl);
  CHECK(permits(*acl, "a:a", Permission::kWrite));
  CHECK(permits(*acl, "b:b", Permission::kRead));
  CHECK_FALSE(permits(*acl, "b:b", Permission::kWrite));
  CHECK(permits(*acl, "c:c", Permission::kWriteAcp));
  CHECK_FALSE(permits(*acl, "", Permission::kWriteAcp));  // anonymous is not authenticated
  CHECK_FALSE(permits(*acl, "", Permission::kRead));
  auto open = canned_acl("public-read", "a:a", "a:a");
  REQUIRE(open);
  CHECK(permits(*open, "", Permission::kRead));
  CHECK_FALSE(permits(*open, "", Permission::kWrite));
  // FULL_CONTROL stands for every permission.
  Acl full{.owner = "a:a", .grants = {{GranteeKind::kUser, "b:b", Permission::kFullControl}}};
  CHECK(permits(full, "b:b", Permission::kWriteAcp));
  // An empty owner is nobody's.
  Acl ownerless{.owner = "", .grants = {}};
  CHECK_FALSE(permits(ownerless, "", Permission::kRead));
}

TEST_CASE("s3_acl: x-amz-acl and x-amz-grant-* headers") {
  HeaderMap h;
  auto none = acl_from_headers(h, "b:b", "o:o");
  REQUIRE(std::holds_alternative<std::optional<Acl>>(none));
  CHECK_FALSE(std::get<std::optional<Acl>>(none));

  h.set("x-amz-grant-read",
        "id=\"a:b\", uri=\"http://acs.amazonaws.com/groups/global/AuthenticatedUsers\"");
  h.set("x-amz-grant-write-acp", "id=c:d");
  auto grants = acl_from_headers(h, "b:b", "o:o");
  REQUIRE(std::holds_alternative<std::optional<Acl>>(grants));
  const auto& acl = std::get<std::optional<Acl>>(grants);
  REQUIRE(acl);
  CHECK(encode_acl(*acl) ==
        R"({"Owner":"o:o","Grant":[{"Permission":"READ","Grantee":"a:b"},)"
        R"({"Permission":"READ","Grantee":"AuthenticatedUsers"},)"
        R"({"Permission":"WRITE_ACP","Grantee":"c:d"}]})");

  h.set("x-amz-acl", "private");
  auto both = acl_from_headers(h, "b:b", "o:o");
  REQUIRE(std::holds_alternative<S3Error>(both));
  CHECK(std::get<S3Error>(both).code == "InvalidRequest");

  HeaderMap bad;
  bad.set("x-amz-acl", "everyone");
  CHECK(std::get<S3Error>(acl_from_headers(bad, "b", "o")).code == "InvalidArgument");
  HeaderMap email;
  email.set("x-amz-grant-read", "emailAddress=a@example.com");
  CHECK(std::get<S3Error>(acl_from_headers(email, "b", "o")).code == "NotImplemented");
  HeaderMap uri;
  uri.set("x-amz-grant-read", "uri=http://example.com/everyone");
  CHECK(std::get<S3Error>(acl_from_headers(uri, "b", "o")).code == "InvalidArgument");
  HeaderMap kind;
  kind.set("x-amz-grant-read", "name=someone");
  CHECK(std::get<S3Error>(acl_from_headers(kind, "b", "o")).code == "InvalidArgument");
}

TEST_CASE("s3_acl: an AccessControlPolicy document") {
  auto v = parse_acl_document(policy("o:o", user_grant("o:o", "FULL_CONTROL") +
                                                user_grant("a:b", "READ_ACP")));
  REQUIRE(std::holds_alternative<Acl>(v));
  const Acl& acl = std::get<Acl>(v);
  CHECK(acl.owner == "o:o");
  CHECK(acl.grants == std::vector<Grant>{{GranteeKind::kUser, "o:o", Permission::kFullControl},
                                         {GranteeKind::kUser, "a:b", Permission::kReadAcp}});
  // What GET ?acl answers reads back as the same ACL.
  auto again = parse_acl_document(acl_document(acl));
  REQUIRE(std::holds_alternative<Acl>(again));
  CHECK(std::get<Acl>(again) == acl);

  CHECK(code_of(parse_acl_document("<AccessControlPolicy")) == "MalformedACLError");
  CHECK(code_of(parse_acl_document("<Other/>")) == "MalformedACLError");
  CHECK(code_of(parse_acl_document(
            "<AccessControlPolicy><AccessControlList/></AccessControlPolicy>")) ==
        "MalformedACLError");  // no owner
  CHECK(code_of(parse_acl_document(policy("o:o", user_grant("a:b", "EVERYTHING")))) ==
        "NotImplemented");
  CHECK(code_of(parse_acl_document(policy(
            "o:o", "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                   "xsi:type=\"AmazonCustomerByEmail\"><EmailAddress>a@example.com"
                   "</EmailAddress></Grantee><Permission>READ</Permission></Grant>"))) ==
        "NotImplemented");
  CHECK(code_of(parse_acl_document(policy(
            "o:o", "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                   "xsi:type=\"Group\"><URI>http://example.com/all</URI></Grantee>"
                   "<Permission>READ</Permission></Grant>"))) == "InvalidArgument");
  // An external entity is never fetched or expanded.
  auto xxe = parse_acl_document("<!DOCTYPE a [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>" +
                                policy("&x;", user_grant("a:b", "READ")));
  if (const auto* read = std::get_if<Acl>(&xxe)) CHECK(read->owner.find("root") == std::string::npos);
}

TEST_CASE("s3_acl: GET ?acl lists groups' grants before users'") {
  Acl acl{.owner = "o:o",
          .grants = {{GranteeKind::kUser, "o:o", Permission::kFullControl},
                     {GranteeKind::kAllUsers, "", Permission::kRead}}};
  std::string doc = acl_document(acl);
  CHECK(doc.find("AllUsers") < doc.find("<ID>o:o</ID><DisplayName>o:o</DisplayName></Grantee>"));
  CHECK(doc.starts_with("<?xml version='1.0' encoding='UTF-8'?>\n<AccessControlPolicy "
                        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>o:o</ID>"
                        "<DisplayName>o:o</DisplayName></Owner>"));
}

TEST_CASE("s3_acl: public grants, and a public access block") {
  CHECK(apus::proxy::s3api::is_public(*canned_acl("public-read", "a", "a")));
  CHECK(apus::proxy::s3api::is_public(*canned_acl("authenticated-read", "a", "a")));
  CHECK_FALSE(apus::proxy::s3api::is_public(*canned_acl("bucket-owner-read", "a", "b")));
  auto open = canned_acl("public-read", "a:a", "a:a");
  CHECK(permits(*open, "b:b", Permission::kRead));
  CHECK_FALSE(permits(*open, "b:b", Permission::kRead, true));  // IgnorePublicAcls
  CHECK(permits(*open, "a:a", Permission::kRead, true));        // the owner still may

  using apus::proxy::s3api::PublicAccessBlock;
  auto parsed = apus::proxy::s3api::parse_public_access_block(
      "<PublicAccessBlockConfiguration><BlockPublicAcls>true</BlockPublicAcls>"
      "<RestrictPublicBuckets>false</RestrictPublicBuckets></PublicAccessBlockConfiguration>");
  REQUIRE(std::holds_alternative<PublicAccessBlock>(parsed));
  const auto& b = std::get<PublicAccessBlock>(parsed);
  CHECK(b.block_public_acls);
  CHECK_FALSE(b.ignore_public_acls);
  CHECK(apus::proxy::s3api::decode_public_access_block(
            apus::proxy::s3api::encode_public_access_block(b)) == b);
  CHECK_FALSE(apus::proxy::s3api::decode_public_access_block(""));
  CHECK(std::get<S3Error>(apus::proxy::s3api::parse_public_access_block(
                              "<PublicAccessBlockConfiguration><BlockPublicAcls>yes"
                              "</BlockPublicAcls></PublicAccessBlockConfiguration>"))
            .code == "MalformedXML");
  CHECK(apus::proxy::s3api::public_access_block_document(b).find(
            "<BlockPublicAcls>true</BlockPublicAcls><IgnorePublicAcls>false</IgnorePublicAcls>") !=
        std::string::npos);
}

TEST_CASE("s3_acl: at most 100 grants, and what can be kept") {
  std::string many;
  for (int i = 0; i < 101; ++i) many += user_grant("u:" + std::to_string(i), "READ");
  CHECK(code_of(parse_acl_document(policy("o:o", many))) == "InvalidArgument");
  HeaderMap h;
  std::string ids;
  for (int i = 0; i < 60; ++i) ids += (i ? "," : "") + std::string("id=") + std::string(200, 'x');
  h.set("x-amz-grant-read", ids);
  CHECK(std::get<S3Error>(acl_from_headers(h, "b", "o")).code == "InvalidArgument");
}

TEST_CASE("object ownership: the OwnershipControls document and its names") {
  using apus::proxy::s3api::ObjectOwnership;
  using apus::proxy::s3api::ownership_controls_document;
  using apus::proxy::s3api::ownership_from_name;
  using apus::proxy::s3api::parse_ownership_controls;
  auto doc = [](const std::string& rules) {
    return "<OwnershipControls xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + rules +
           "</OwnershipControls>";
  };
  auto rule = [](const std::string& o) {
    return "<Rule><ObjectOwnership>" + o + "</ObjectOwnership></Rule>";
  };
  for (auto o : {ObjectOwnership::kObjectWriter, ObjectOwnership::kBucketOwnerPreferred,
                 ObjectOwnership::kBucketOwnerEnforced}) {
    auto parsed = parse_ownership_controls(ownership_controls_document(o));
    REQUIRE(std::holds_alternative<ObjectOwnership>(parsed));
    CHECK(std::get<ObjectOwnership>(parsed) == o);
  }
  CHECK(ownership_controls_document(ObjectOwnership::kBucketOwnerEnforced).find(
            "<Rule><ObjectOwnership>BucketOwnerEnforced</ObjectOwnership></Rule>") !=
        std::string::npos);
  CHECK(std::get<ObjectOwnership>(parse_ownership_controls(doc(rule("BucketOwnerPreferred")))) ==
        ObjectOwnership::kBucketOwnerPreferred);
  for (const std::string& bad : {doc(""), doc(rule("Everyone")),
                                 doc(rule("ObjectWriter") + rule("ObjectWriter")),
                                 std::string("<Other/>"), std::string("not xml")}) {
    auto parsed = parse_ownership_controls(bad);
    REQUIRE(std::holds_alternative<S3Error>(parsed));
    CHECK(std::get<S3Error>(parsed).code == "MalformedXML");
  }
  CHECK_FALSE(ownership_from_name("objectwriter").has_value());  // names are exact
}
