// S3 ACLs (s3_acl.h): the model, and with s3_acl = true the ?acl operations and the access
// check every request passes (s3_request.h).
#include "proxy/s3api/s3_acl.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <array>
#include <utility>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "common/utf8.h"
#include "proxy/s3api/bucket_policy.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/tagging.h"
#include "proxy/subrequest.h"

namespace apus::proxy::s3api {

namespace {

constexpr const char* kXsi = "http://www.w3.org/2001/XMLSchema-instance";

struct GroupName {
  GranteeKind kind;
  std::string_view stored;  // Swift's class name, as encode_acl() writes it
  std::string_view uri;
};
constexpr std::array<GroupName, 3> kGroups = {{
    {GranteeKind::kAllUsers, "AllUsers", "http://acs.amazonaws.com/groups/global/AllUsers"},
    {GranteeKind::kAuthenticatedUsers, "AuthenticatedUsers",
     "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"},
    {GranteeKind::kLogDelivery, "LogDelivery", "http://acs.amazonaws.com/groups/s3/LogDelivery"},
}};

const GroupName* group_of(GranteeKind kind) {
  for (const auto& g : kGroups) {
    if (g.kind == kind) return &g;
  }
  return nullptr;
}

constexpr std::array<std::pair<Permission, std::string_view>, 5> kPermissions = {{
    {Permission::kFullControl, "FULL_CONTROL"},
    {Permission::kRead, "READ"},
    {Permission::kWrite, "WRITE"},
    {Permission::kReadAcp, "READ_ACP"},
    {Permission::kWriteAcp, "WRITE_ACP"},
}};

std::optional<Permission> permission_of(std::string_view name) {
  for (const auto& [p, n] : kPermissions) {
    if (n == name) return p;
  }
  return std::nullopt;
}

S3Error malformed_acl() {
  return {.status = 400, .code = "MalformedACLError",
          .message = "The XML you provided was not well-formed or did not validate against our "
                     "published schema.",
          .details = {}};
}

// A group named by its URI: InvalidArgument for one S3 does not have (Swift's
// get_group_subclass_from_uri()).
std::variant<GranteeKind, S3Error> group_by_uri(std::string_view uri) {
  for (const auto& g : kGroups) {
    if (g.uri == uri) return g.kind;
  }
  return S3Error::invalid_argument("uri", std::string(uri), "Invalid group uri");
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// S3's limit on grants, and what Apus keeps: the stored JSON travels as one header line to
// the storage servers, whose lines end at 8192 bytes.
constexpr size_t kMaxGrants = 100;
constexpr size_t kMaxStoredAclBytes = 8000;

// The ACL a client asked for, or InvalidArgument when it is more than can be kept.
std::variant<Acl, S3Error> within_limits(Acl acl) {
  if (acl.grants.size() > kMaxGrants) {
    return S3Error::invalid_argument("AccessControlList", "",
                                     "An ACL may have at most 100 grants.");
  }
  if (encode_acl(acl).size() > kMaxStoredAclBytes) {
    return S3Error::invalid_argument("AccessControlList", "",
                                     "The ACL is too large: Apus keeps at most 8000 bytes of it.");
  }
  return acl;
}

}  // namespace

std::string_view permission_name(Permission p) {
  for (const auto& [q, n] : kPermissions) {
    if (q == p) return n;
  }
  return "READ";
}

std::optional<Acl> canned_acl(std::string_view name, const std::string& bucket_owner,
                              const std::string& owner) {
  auto user = [](const std::string& id, Permission p) {
    return Grant{.kind = GranteeKind::kUser, .user = id, .permission = p};
  };
  auto group = [](GranteeKind k, Permission p) {
    return Grant{.kind = k, .user = {}, .permission = p};
  };
  Acl acl{.owner = owner, .grants = {}};
  auto& g = acl.grants;
  if (name == "private") {
    g = {user(owner, Permission::kFullControl)};
  } else if (name == "public-read") {
    g = {group(GranteeKind::kAllUsers, Permission::kRead), user(owner, Permission::kFullControl)};
  } else if (name == "public-read-write") {
    g = {group(GranteeKind::kAllUsers, Permission::kRead),
         group(GranteeKind::kAllUsers, Permission::kWrite), user(owner, Permission::kFullControl)};
  } else if (name == "authenticated-read") {
    g = {group(GranteeKind::kAuthenticatedUsers, Permission::kRead),
         user(owner, Permission::kFullControl)};
  } else if (name == "bucket-owner-read") {
    g = {user(bucket_owner, Permission::kRead), user(owner, Permission::kFullControl)};
  } else if (name == "bucket-owner-full-control") {
    g = {user(owner, Permission::kFullControl), user(bucket_owner, Permission::kFullControl)};
  } else if (name == "log-delivery-write") {
    g = {group(GranteeKind::kLogDelivery, Permission::kWrite),
         group(GranteeKind::kLogDelivery, Permission::kReadAcp),
         user(owner, Permission::kFullControl)};
  } else {
    return std::nullopt;
  }
  return acl;
}

std::string encode_acl(const Acl& acl) {
  boost::json::object out;
  out["Owner"] = acl.owner;
  boost::json::array grants;
  for (const Grant& g : acl.grants) {
    boost::json::object one;
    one["Permission"] = permission_name(g.permission);
    const GroupName* group = group_of(g.kind);
    one["Grantee"] = group ? group->stored : std::string_view(g.user);
    grants.push_back(std::move(one));
  }
  out["Grant"] = std::move(grants);
  return boost::json::serialize(out);
}

std::optional<Acl> decode_acl(std::string_view json) {
  if (json.empty()) return std::nullopt;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto& o = v.as_object();
  Acl acl;
  if (const auto* owner = o.if_contains("Owner"); owner && owner->is_string()) {
    acl.owner = std::string(owner->as_string());
  }
  if (const auto* grants = o.if_contains("Grant"); grants && grants->is_array()) {
    for (const auto& item : grants->as_array()) {
      if (!item.is_object()) return std::nullopt;
      const auto* who = item.as_object().if_contains("Grantee");
      const auto* what = item.as_object().if_contains("Permission");
      if (!who || !who->is_string() || !what || !what->is_string()) return std::nullopt;
      auto permission = permission_of(std::string_view(what->as_string()));
      if (!permission) return std::nullopt;
      Grant g{.kind = GranteeKind::kUser, .user = std::string(who->as_string()),
              .permission = *permission};
      for (const auto& group : kGroups) {
        if (group.stored == g.user) {
          g.kind = group.kind;
          g.user.clear();
        }
      }
      acl.grants.push_back(std::move(g));
    }
  }
  return acl;
}

std::string acl_document(const Acl& acl) {
  pugi::xml_node root;
  auto doc = result_document("AccessControlPolicy", &root);
  pugi::xml_node owner = root.append_child("Owner");
  add_text(owner, "ID", acl.owner);
  add_text(owner, "DisplayName", acl.owner);
  pugi::xml_node list = root.append_child("AccessControlList");
  // Groups' grants first, then users', each in the order stored (as RGW lists them; Swift's
  // canned ACLs already are in this order).
  std::vector<const Grant*> ordered;
  for (const Grant& g : acl.grants) {
    if (g.kind != GranteeKind::kUser) ordered.push_back(&g);
  }
  for (const Grant& g : acl.grants) {
    if (g.kind == GranteeKind::kUser) ordered.push_back(&g);
  }
  for (const Grant* grant_ptr : ordered) {
    const Grant& g = *grant_ptr;
    pugi::xml_node grant = list.append_child("Grant");
    pugi::xml_node grantee = grant.append_child("Grantee");
    grantee.append_attribute("xmlns:xsi") = kXsi;
    if (const GroupName* group = group_of(g.kind)) {
      grantee.append_attribute("xsi:type") = "Group";
      add_text(grantee, "URI", group->uri);
    } else {
      grantee.append_attribute("xsi:type") = "CanonicalUser";
      add_text(grantee, "ID", g.user);
      add_text(grantee, "DisplayName", g.user);
    }
    add_text(grant, "Permission", permission_name(g.permission));
  }
  return to_xml(doc);
}

std::variant<Acl, S3Error> parse_acl_document(std::string_view xml) {
  // S3's documents are UTF-8 (pugixml does not check; the stored JSON must be).
  if (!common::valid_utf8(xml)) return malformed_acl();
  pugi::xml_document doc;
  // No DOCTYPE or entity is expanded (pugixml never fetches external entities).
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype)) {
    return malformed_acl();
  }
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "AccessControlPolicy") return malformed_acl();
  pugi::xml_node owner_id = root.child("Owner").child("ID");
  if (!owner_id) return malformed_acl();
  Acl acl{.owner = owner_id.text().get(), .grants = {}};
  pugi::xml_node list = root.child("AccessControlList");
  if (!list) return malformed_acl();
  for (pugi::xml_node grant : list.children("Grant")) {
    pugi::xml_node grantee = grant.child("Grantee");
    pugi::xml_node permission = grant.child("Permission");
    if (!grantee || !permission) return malformed_acl();
    Grant g;
    std::string_view type = grantee.attribute("xsi:type").value();
    if (type == "CanonicalUser") {
      pugi::xml_node id = grantee.child("ID");
      if (!id || std::string_view(id.text().get()).empty()) return malformed_acl();
      g.user = id.text().get();
    } else if (type == "Group") {
      auto kind = group_by_uri(grantee.child("URI").text().get());
      if (auto* e = std::get_if<S3Error>(&kind)) return std::move(*e);
      g.kind = std::get<GranteeKind>(kind);
    } else if (type == "AmazonCustomerByEmail") {
      return errors::not_implemented();
    } else {
      return malformed_acl();
    }
    auto p = permission_of(permission.text().get());
    if (!p) return errors::not_implemented();
    g.permission = *p;
    acl.grants.push_back(std::move(g));
  }
  return within_limits(std::move(acl));
}

std::variant<std::optional<Acl>, S3Error> acl_from_headers(const common::http::HeaderMap& h,
                                                           const std::string& bucket_owner,
                                                           const std::string& owner) {
  std::vector<Grant> grants;
  for (const auto& [name, value] : h) {
    if (!common::http::istarts_with(name, "x-amz-grant-")) continue;
    std::string which;
    for (char c : std::string_view(name).substr(12)) {
      which.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    auto permission = permission_of(which);
    if (!permission) continue;  // as Swift: a header it does not know is ignored
    for (const std::string& grantee : common::list_from_csv(value)) {
      size_t eq = grantee.find('=');
      if (eq == std::string::npos) return S3Error::invalid_request();
      std::string type = common::http::to_lower(trim(std::string_view(grantee).substr(0, eq)));
      std::string who = trim(std::string_view(grantee).substr(eq + 1));
      while (!who.empty() && (who.front() == '"' || who.front() == '\'')) who.erase(0, 1);
      while (!who.empty() && (who.back() == '"' || who.back() == '\'')) who.pop_back();
      Grant g{.kind = GranteeKind::kUser, .user = {}, .permission = *permission};
      if (!common::valid_utf8(who)) return S3Error::invalid_argument(type, "", "Invalid id");
      if (type == "id") {
        g.user = who;
      } else if (type == "uri") {
        auto kind = group_by_uri(who);
        if (auto* e = std::get_if<S3Error>(&kind)) return std::move(*e);
        g.kind = std::get<GranteeKind>(kind);
      } else if (type == "emailaddress") {
        return errors::not_implemented();
      } else {
        return S3Error::invalid_argument(type, who, "Argument format not recognized");
      }
      grants.push_back(std::move(g));
    }
  }
  if (auto canned = h.get("x-amz-acl")) {
    if (!grants.empty()) {
      return S3Error::invalid_request("Specifying both Canned ACLs and Header Grants is not allowed");
    }
    auto acl = canned_acl(*canned, bucket_owner, owner);
    if (!acl) return S3Error::invalid_argument("x-amz-acl", std::string(*canned));
    return std::optional<Acl>(std::move(*acl));
  }
  if (grants.empty()) return std::optional<Acl>();
  auto checked = within_limits(Acl{.owner = owner, .grants = std::move(grants)});
  if (auto* e = std::get_if<S3Error>(&checked)) return std::move(*e);
  return std::optional<Acl>(std::move(std::get<Acl>(checked)));
}

bool is_public(const Acl& acl) {
  return std::any_of(acl.grants.begin(), acl.grants.end(), [](const Grant& g) {
    return g.kind == GranteeKind::kAllUsers || g.kind == GranteeKind::kAuthenticatedUsers;
  });
}

namespace {
constexpr std::array<std::pair<const char*, bool PublicAccessBlock::*>, 4> kBlockFields = {{
    {"BlockPublicAcls", &PublicAccessBlock::block_public_acls},
    {"IgnorePublicAcls", &PublicAccessBlock::ignore_public_acls},
    {"BlockPublicPolicy", &PublicAccessBlock::block_public_policy},
    {"RestrictPublicBuckets", &PublicAccessBlock::restrict_public_buckets},
}};
}  // namespace

std::variant<PublicAccessBlock, S3Error> parse_public_access_block(std::string_view xml) {
  pugi::xml_document doc;
  if (!common::valid_utf8(xml) || !doc.load_buffer(xml.data(), xml.size())) {
    return errors::malformed_xml();
  }
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "PublicAccessBlockConfiguration") {
    return errors::malformed_xml();
  }
  PublicAccessBlock b;
  for (const auto& [name, field] : kBlockFields) {
    pugi::xml_node n = root.child(name);
    if (!n) continue;
    std::string_view v = n.text().get();
    if (v == "true" || v == "TRUE" || v == "True") {
      b.*field = true;
    } else if (v != "false" && v != "FALSE" && v != "False") {
      return errors::malformed_xml();
    }
  }
  return b;
}

std::string public_access_block_document(const PublicAccessBlock& b) {
  pugi::xml_node root;
  auto doc = result_document("PublicAccessBlockConfiguration", &root);
  for (const auto& [name, field] : kBlockFields) add_text(root, name, b.*field ? "true" : "false");
  return to_xml(doc);
}

std::string encode_public_access_block(const PublicAccessBlock& b) {
  boost::json::object o;
  for (const auto& [name, field] : kBlockFields) o[name] = b.*field;
  return boost::json::serialize(o);
}

std::optional<PublicAccessBlock> decode_public_access_block(std::string_view stored) {
  if (stored.empty()) return std::nullopt;
  boost::system::error_code ec;
  auto v = boost::json::parse(stored, ec);
  if (ec || !v.is_object()) return std::nullopt;
  PublicAccessBlock b;
  for (const auto& [name, field] : kBlockFields) {
    const auto* f = v.as_object().if_contains(name);
    b.*field = f && f->is_bool() && f->as_bool();
  }
  return b;
}

std::optional<ObjectOwnership> ownership_from_name(std::string_view name) {
  if (name == "ObjectWriter") return ObjectOwnership::kObjectWriter;
  if (name == "BucketOwnerPreferred") return ObjectOwnership::kBucketOwnerPreferred;
  if (name == "BucketOwnerEnforced") return ObjectOwnership::kBucketOwnerEnforced;
  return std::nullopt;
}

std::string_view ownership_name(ObjectOwnership o) {
  switch (o) {
    case ObjectOwnership::kBucketOwnerPreferred: return "BucketOwnerPreferred";
    case ObjectOwnership::kBucketOwnerEnforced: return "BucketOwnerEnforced";
    default: return "ObjectWriter";
  }
}

std::variant<ObjectOwnership, S3Error> parse_ownership_controls(std::string_view xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return errors::malformed_xml();
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "OwnershipControls") return errors::malformed_xml();
  std::optional<ObjectOwnership> found;
  size_t rules = 0;
  for (pugi::xml_node rule : root.children("Rule")) {
    ++rules;
    found = ownership_from_name(rule.child("ObjectOwnership").text().get());
  }
  if (rules != 1 || !found) return errors::malformed_xml();
  return *found;
}

std::string ownership_controls_document(ObjectOwnership o) {
  pugi::xml_node root;
  pugi::xml_document doc = result_document("OwnershipControls", &root);
  add_text(root.append_child("Rule"), "ObjectOwnership", ownership_name(o));
  return to_xml(doc);
}

bool permits(const Acl& acl, std::string_view user, Permission p, bool ignore_public) {
  if (!user.empty() && user == acl.owner) return true;
  for (const Grant& g : acl.grants) {
    if (g.permission != p && g.permission != Permission::kFullControl) continue;
    if (ignore_public &&
        (g.kind == GranteeKind::kAllUsers || g.kind == GranteeKind::kAuthenticatedUsers)) {
      continue;
    }
    switch (g.kind) {
      case GranteeKind::kUser:
        if (!user.empty() && g.user == user) return true;
        break;
      case GranteeKind::kAllUsers:
        return true;
      case GranteeKind::kAuthenticatedUsers:
        if (!user.empty()) return true;
        break;
      case GranteeKind::kLogDelivery: {
        size_t colon = user.find(':');
        if (user.substr(colon == std::string_view::npos ? 0 : colon + 1) == ".log_delivery") {
          return true;
        }
        break;
      }
    }
  }
  return false;
}

}  // namespace apus::proxy::s3api

// ---- s3_acl: the access check and ?acl -------------------------------------------------------

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

// PutObjectAcl changes an object's ACL with a POST, which cannot change sysmeta: the new ACL is
// kept in transient sysmeta, which wins over the one the object was written with. (Swift's
// s3api copies the object onto itself instead, rewriting its data and its Last-Modified; its
// s3api does not read this header, so in a mixed cluster it sees the ACL of the write.)
constexpr std::string_view kObjectAclTransient = "X-Object-Transient-Sysmeta-S3api-Acl";

// The object's ACL from its HEAD or GET answer.
std::optional<Acl> object_acl(const HeaderMap& h) {
  if (auto changed = decode_acl(h.get_or(kObjectAclTransient, ""))) return changed;
  return decode_acl(h.get_or(kObjectAclSysmeta, ""));
}

// The account that holds s3's bucket.
const std::string& bucket_account(const S3Request& s3) {
  auto it = s3.bucket_accounts.find(s3.bucket);
  return it != s3.bucket_accounts.end() ? it->second : s3.requester_account();
}

// Whether the requester may do `p` on a resource of `account` whose ACL is `acl`. A resource
// without an owner (made before s3_acl, or through Swift's API) belongs to the users of its
// account; allow_no_owner opens it to everyone, as in Swift.
bool allowed(const S3Request& s3, const std::optional<Acl>& acl, const std::string& account,
             Permission p) {
  if (s3.ownership == ObjectOwnership::kBucketOwnerEnforced) {
    // ACLs are off: the bucket's owner (its account's users) may; others only by policy.
    return !s3.requester_account().empty() && s3.requester_account() == account;
  }
  const bool ignore_public = s3.public_block && s3.public_block->ignore_public_acls;
  if (!acl || acl->owner.empty()) {
    if (s3.config.allow_no_owner) return true;
    if (!s3.requester_account().empty() && s3.requester_account() == account) return true;
    return acl && permits(*acl, s3.user_id(), p, ignore_public);
  }
  return permits(*acl, s3.user_id(), p, ignore_public);
}

// BlockPublicAcls: a public ACL asked for is refused.
bool blocked(const S3Request& s3, const Acl& acl) {
  return s3.public_block && s3.public_block->block_public_acls && is_public(acl);
}

bool is_owner(const S3Request& s3, const std::optional<Acl>& acl, const std::string& account) {
  if (!acl || acl->owner.empty()) {
    return s3.config.allow_no_owner ||
           (!s3.requester_account().empty() && s3.requester_account() == account);
  }
  return !s3.anonymous() && acl->owner == s3.user_id();
}

// What a request needs of the ACLs (Swift's ACL_MAP, by S3 operation).
enum class Target : uint8_t {
  kNothing,      // ListBuckets, or what dispatch refuses anyway
  kBucket,       // a permission on the bucket
  kBucketOwner,  // the bucket's configuration (versioning, tagging, location, ...)
  kObject,       // a permission on the object
  kNewBucket,    // CreateBucket
};
struct Need {
  Target target = Target::kNothing;
  Permission permission = Permission::kRead;
};

// Whether the request names a bucket's configuration (a sub-resource only its owner may read
// or change). Other query parameters of a bucket GET are a listing's (S3 ignores those it
// does not know).
bool configuration_request(const S3Request& s3) {
  static constexpr std::string_view kConfigurations[] = {
      "accelerate", "analytics", "cors", "encryption", "intelligent-tiering", "inventory",
      "lifecycle", "location", "logging", "metrics", "notification", "object-lock",
      "ownershipControls", "policy", "policyStatus", "publicAccessBlock", "replication",
      "requestPayment", "tagging", "versioning", "website"};
  for (std::string_view c : kConfigurations) {
    if (s3.has(c)) return true;
  }
  return false;
}

Need need_of(const S3Request& s3) {
  const std::string& m = s3.client.method;
  const bool read = m == "GET" || m == "HEAD";
  if (s3.has("acl")) {
    return {s3.key ? Target::kObject : Target::kBucket,
            m == "PUT" ? Permission::kWriteAcp : Permission::kReadAcp};
  }
  if (s3.has("delete")) return {Target::kBucket, Permission::kWrite};
  if (s3.key) {
    const bool part_read = read && s3.has("partNumber") && !s3.has("uploadId");
    if (s3.has("uploadId") || s3.has("uploads") || (s3.has("partNumber") && !part_read)) {
      return {Target::kBucket, read ? Permission::kRead : Permission::kWrite};
    }
    if (s3.has("tagging")) {
      return read ? Need{Target::kObject, Permission::kRead}
                  : Need{Target::kBucket, Permission::kWrite};
    }
    if (read) return {Target::kObject, Permission::kRead};
    return {Target::kBucket, Permission::kWrite};
  }
  if (configuration_request(s3)) return {Target::kBucketOwner, Permission::kFullControl};
  if (read) return {Target::kBucket, Permission::kRead};
  if (m == "PUT") return {Target::kNewBucket, Permission::kFullControl};
  if (m == "DELETE") return {Target::kBucketOwner, Permission::kFullControl};
  return {};
}

// Whether an ACL grants nothing beyond its owner's FULL_CONTROL (what BucketOwnerEnforced
// takes).
bool only_owner(const Acl& acl) {
  return std::all_of(acl.grants.begin(), acl.grants.end(), [&](const Grant& g) {
    return g.kind == GranteeKind::kUser && g.user == acl.owner;
  });
}

S3Error invalid_bucket_acl_with_object_ownership() {
  return {.status = 400, .code = "InvalidBucketAclWithObjectOwnership",
          .message = "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced "
                     "setting"};
}

S3Error access_control_list_not_supported() {
  return {.status = 400, .code = "AccessControlListNotSupported",
          .message = "The bucket does not allow ACLs"};
}

// Whether the request writes an object or a bucket, which then gets s3.new_acl.
bool writes_resource(const S3Request& s3, const Need& need) {
  if (need.target == Target::kNewBucket) return true;
  const std::string& m = s3.client.method;
  if (!s3.key || s3.has("acl") || s3.has("tagging") || s3.has("uploadId")) return false;
  if (m == "POST") return s3.has("uploads");  // CreateMultipartUpload
  return m == "PUT" && !s3.has("partNumber");
}

// The ACL a write stores: the one its headers (`asked`: the request's, or a POST form's
// fields) ask for, else private.
std::optional<S3Error> plan_new_acl(S3Request& s3, bool bucket, const HeaderMap& asked) {
  const std::string bucket_owner =
      bucket ? s3.user_id()
             : (s3.bucket_acl && !s3.bucket_acl->owner.empty() ? s3.bucket_acl->owner
                                                               : s3.user_id());
  // An anonymous write (a public-write bucket) is the bucket owner's.
  std::string owner = s3.anonymous() ? bucket_owner : s3.user_id();
  if (!bucket && s3.ownership != ObjectOwnership::kObjectWriter) {
    const std::string canned(asked.get_or("x-amz-acl", ""));
    bool grants = false;
    for (const auto& [name, value] : asked) {
      grants = grants || common::http::istarts_with(name, "x-amz-grant-");
    }
    if (s3.ownership == ObjectOwnership::kBucketOwnerEnforced) {
      if (grants || (!canned.empty() && canned != "bucket-owner-full-control")) {
        return access_control_list_not_supported();
      }
      s3.new_acl = *canned_acl("private", bucket_owner, bucket_owner);
      return std::nullopt;
    }
    if (canned == "bucket-owner-full-control") owner = bucket_owner;  // BucketOwnerPreferred
  }
  auto acl = acl_from_headers(asked, bucket_owner, owner);
  if (auto* e = std::get_if<S3Error>(&acl)) return std::move(*e);
  auto& given = std::get<std::optional<Acl>>(acl);
  s3.new_acl = given ? std::move(*given) : *canned_acl("private", bucket_owner, owner);
  return std::nullopt;
}

// The S3 action a request is, as bucket policies name it ("s3:GetObject").
std::string policy_action(const S3Request& s3) {
  const std::string& m = s3.client.method;
  const bool read = m == "GET" || m == "HEAD";
  const bool version = s3.has("versionId");
  auto by_method = [&](std::string_view get, std::string_view put,
                       std::string_view del) -> std::string {
    return std::string(read ? get : m == "DELETE" ? del : put);
  };
  if (s3.has("acl")) {
    if (s3.key) return read ? (version ? "s3:GetObjectVersionAcl" : "s3:GetObjectAcl")
                            : (version ? "s3:PutObjectVersionAcl" : "s3:PutObjectAcl");
    return read ? "s3:GetBucketAcl" : "s3:PutBucketAcl";
  }
  if (s3.has("policy")) {
    return by_method("s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy");
  }
  if (s3.has("policyStatus")) return "s3:GetBucketPolicyStatus";
  if (s3.has("tagging")) {
    if (s3.key) {
      return by_method(version ? "s3:GetObjectVersionTagging" : "s3:GetObjectTagging",
                       version ? "s3:PutObjectVersionTagging" : "s3:PutObjectTagging",
                       version ? "s3:DeleteObjectVersionTagging" : "s3:DeleteObjectTagging");
    }
    return by_method("s3:GetBucketTagging", "s3:PutBucketTagging", "s3:PutBucketTagging");
  }
  // Bucket configurations (a DELETE of one is its Put action, as in AWS).
  static constexpr std::array<std::array<std::string_view, 3>, 12> kConfigurations = {{
      {"cors", "s3:GetBucketCORS", "s3:PutBucketCORS"},
      {"versioning", "s3:GetBucketVersioning", "s3:PutBucketVersioning"},
      {"location", "s3:GetBucketLocation", "s3:GetBucketLocation"},
      {"logging", "s3:GetBucketLogging", "s3:PutBucketLogging"},
      {"publicAccessBlock", "s3:GetBucketPublicAccessBlock", "s3:PutBucketPublicAccessBlock"},
      {"lifecycle", "s3:GetLifecycleConfiguration", "s3:PutLifecycleConfiguration"},
      {"encryption", "s3:GetEncryptionConfiguration", "s3:PutEncryptionConfiguration"},
      {"object-lock", "s3:GetBucketObjectLockConfiguration",
       "s3:PutBucketObjectLockConfiguration"},
      {"ownershipControls", "s3:GetBucketOwnershipControls", "s3:PutBucketOwnershipControls"},
      {"website", "s3:GetBucketWebsite", "s3:PutBucketWebsite"},
      {"notification", "s3:GetBucketNotification", "s3:PutBucketNotification"},
      {"requestPayment", "s3:GetBucketRequestPayment", "s3:PutBucketRequestPayment"}}};
  for (const auto& [param, get, put] : kConfigurations) {
    if (s3.has(param)) return std::string(read ? get : put);
  }
  if (s3.has("retention")) return read ? "s3:GetObjectRetention" : "s3:PutObjectRetention";
  if (s3.has("legal-hold")) return read ? "s3:GetObjectLegalHold" : "s3:PutObjectLegalHold";
  if (s3.has("delete")) return "s3:DeleteObject";
  if (!s3.key) {
    if (s3.has("uploads")) return "s3:ListBucketMultipartUploads";
    if (s3.has("versions")) return "s3:ListBucketVersions";
    if (read) return "s3:ListBucket";
    return m == "PUT" ? "s3:CreateBucket" : m == "DELETE" ? "s3:DeleteBucket" : "s3:PutObject";
  }
  if (s3.has("uploadId")) {
    if (read) return "s3:ListMultipartUploadParts";
    if (m == "DELETE") return "s3:AbortMultipartUpload";
    return "s3:PutObject";
  }
  if (s3.has("attributes")) {
    return version ? "s3:GetObjectVersionAttributes" : "s3:GetObjectAttributes";
  }
  if (read) return version ? "s3:GetObjectVersion" : "s3:GetObject";
  if (m == "DELETE") return version ? "s3:DeleteObjectVersion" : "s3:DeleteObject";
  return "s3:PutObject";
}

// The resource a request is on: the bucket, or one of its objects.
std::string policy_resource(const std::string& bucket, const std::optional<std::string>& key) {
  return "arn:aws:s3:::" + bucket + (key ? "/" + *key : "");
}

// The value of a condition key (lower-cased) in `s3`'s request; `object_tags` are the tags of
// the object it is on, when read.
std::optional<std::vector<std::string>> policy_value(const S3Request& s3, std::string_view key,
                                                     const TagSet* object_tags) {
  using Values = std::optional<std::vector<std::string>>;
  auto one = [](std::string_view v) { return Values(std::vector<std::string>{std::string(v)}); };
  const HeaderMap& h = s3.client.headers;
  auto header = [&](std::string_view name) -> Values {
    auto v = h.get(name);
    return v ? one(*v) : std::nullopt;
  };
  auto param = [&](const char* name) -> Values {
    auto it = s3.params.find(name);
    return it != s3.params.end() ? one(it->second) : std::nullopt;
  };
  const std::string& user = s3.user_id();
  if (key == "aws:referer") return header("Referer");
  if (key == "aws:useragent") return header("User-Agent");
  if (key == "aws:sourceip") return one(s3.client.remote_addr);
  // Apus answers plain HTTP; TLS ends in front of it, where this cannot be told.
  if (key == "aws:securetransport") return one("false");
  if (key == "aws:epochtime") return one(std::to_string(std::time(nullptr)));
  if (key == "aws:currenttime") return one(s3_xml_time(std::time(nullptr)));
  if (key == "aws:principaltype") return one(s3.anonymous() ? "Anonymous" : "User");
  if (key == "aws:userid") return s3.anonymous() ? std::nullopt : one(user);
  if (key == "aws:username" || key == "aws:principalaccount") {
    if (s3.anonymous()) return std::nullopt;
    size_t colon = user.find(':');
    return one(key == "aws:username" ? user.substr(colon == std::string::npos ? 0 : colon + 1)
                                     : user.substr(0, colon));
  }
  if (key == "s3:prefix") return param("prefix");
  if (key == "s3:delimiter") return param("delimiter");
  if (key == "s3:max-keys") return param("max-keys");
  if (key == "s3:versionid") return param("versionId");
  if (key == "s3:x-amz-copy-source") {
    auto v = h.get("x-amz-copy-source");
    if (!v) return std::nullopt;
    std::string source = common::http::percent_decode(v->substr(0, v->find('?')));
    if (source.starts_with('/')) source.erase(0, 1);
    return one(source);
  }
  if (key.starts_with("s3:x-amz-")) return header(key.substr(3));
  constexpr std::string_view kExisting = "s3:existingobjecttag/";
  constexpr std::string_view kRequested = "s3:requestobjecttag/";
  if (key.starts_with(kExisting) || key.starts_with(kRequested) ||
      key == "s3:requestobjecttagkeys") {
    TagSet requested;
    const TagSet* tags = object_tags;
    if (!key.starts_with(kExisting)) {
      auto parsed = parse_tagging_header(h.get_or("x-amz-tagging", ""));
      if (auto* t = std::get_if<TagSet>(&parsed)) requested = std::move(*t);
      tags = &requested;
    }
    if (!tags) return std::nullopt;
    std::vector<std::string> out;
    if (key == "s3:requestobjecttagkeys") {
      for (const auto& [k, v] : *tags) out.push_back(k);
      return out.empty() ? std::nullopt : Values(std::move(out));
    }
    // Tag keys are case-sensitive; the condition key is lower-cased here, so compare so.
    std::string_view tag = key.substr(key.find('/') + 1);
    for (const auto& [k, v] : *tags) {
      if (common::http::iequals(k, tag)) out.push_back(v);
    }
    return out.empty() ? std::nullopt : Values(std::move(out));
  }
  return std::nullopt;
}

// The policy's verdict on `action` on bucket/key for s3's requester. Reads the object's tags
// (a HEAD) when a condition needs them. RestrictPublicBuckets: a public policy's Allow counts
// only for the users of the bucket's own account.
net::awaitable<PolicyEffect> policy_verdict(S3Request& s3, const BucketPolicy& policy,
                                            const std::string& action, const std::string& bucket,
                                            const std::optional<std::string>& key,
                                            const std::string& account) {
  std::optional<TagSet> tags;
  if (key && policy.reads_key("s3:existingobjecttag/")) {
    auto v = s3.params.find("versionId");
    std::string query =
        v == s3.params.end() ? "" : "version-id=" + common::http::quote(v->second, "");
    auto head = co_await call_swift(s3, "HEAD", bucket, key, query, 1 << 16,
                                    [&](HeaderMap& h) { h = own_headers(s3.client.headers); });
    if (auto* r = std::get_if<Response>(&head); r && r->status == 200) {
      tags = decode_tags(r->headers.get_or(kObjectTaggingSysmeta, ""));
    }
  }
  PolicyRequest request{.action = action, .resource = policy_resource(bucket, key),
                        .user = s3.user_id(),
                        .value_of = [&](std::string_view k) {
                          return policy_value(s3, k, tags ? &*tags : nullptr);
                        }};
  PolicyEffect verdict = policy.evaluate(request);
  if (verdict == PolicyEffect::kAllow && s3.public_block &&
      s3.public_block->restrict_public_buckets && policy.is_public() &&
      (s3.requester_account().empty() || s3.requester_account() != account)) {
    co_return PolicyEffect::kNone;
  }
  co_return verdict;
}

}  // namespace

net::awaitable<std::optional<S3Error>> authenticate(S3Request& s3) {
  if (s3.anonymous() || !s3.requester_account().empty()) co_return std::nullopt;
  Request req = make_subrequest("TEST", "/v1/" + s3.user_id(), "", HeaderMap());
  auto answer = co_await run_subrequest(s3.next, std::move(req), swift_env(s3), 1 << 16);
  if (!s3.requester_account().empty()) co_return std::nullopt;
  if (!answer.ok()) co_return errors::internal_error();
  // The auth middleware found no user whose key makes the signature (Swift's check of
  // remote_user).
  S3Error e = S3Error::signature_does_not_match();
  e.details = s3.signature->mismatch_details();
  co_return e;
}

net::awaitable<std::optional<S3Error>> check_access(S3Request& s3) {
  if (!s3.config.s3_acl) co_return std::nullopt;
  if (s3.bucket.empty()) {
    // ListBuckets lists the requester's own account.
    if (s3.anonymous()) co_return S3Error::access_denied();
    co_return std::nullopt;
  }
  // An anonymous request has no account of its own: its bucket must be registered.
  if (s3.anonymous() && !s3.bucket_accounts.contains(s3.bucket)) {
    co_return errors::no_such_bucket(s3.bucket);
  }
  const Need need = need_of(s3);
  if (need.target == Target::kNothing) co_return std::nullopt;
  const std::string& account = bucket_account(s3);
  CachedInfo info = co_await s3.config.info->container_info(account, s3.bucket, s3.client, s3.env);
  if (info.status == 0 || info.status >= 500) co_return errors::service_unavailable();
  const bool exists = info.status >= 200 && info.status < 300;
  if (exists) {
    s3.bucket_acl = decode_acl(info.headers.get_or(kBucketAclSysmeta, ""));
    s3.public_block = decode_public_access_block(info.headers.get_or(kPublicAccessBlockSysmeta, ""));
    s3.ownership = ownership_from_name(info.headers.get_or(kOwnershipSysmeta, ""))
                       .value_or(ObjectOwnership::kObjectWriter);
    s3.bucket_lock_read = decode_lock_configuration(info.headers.get_or(kObjectLockSysmeta, ""));
  }
  if (writes_resource(s3, need)) {
    if (auto e = plan_new_acl(s3, need.target == Target::kNewBucket, s3.client.headers)) {
      co_return e;
    }
    if (need.target != Target::kNewBucket && blocked(s3, *s3.new_acl)) {
      co_return S3Error::access_denied();
    }
  }
  if (need.target == Target::kNewBucket) {
    // Only an account's owners make its buckets (Swift's swift_owner check).
    if (s3.anonymous() || !s3.signature->account_owner()) co_return S3Error::access_denied();
    if (auto asked = s3.client.headers.get("x-amz-object-ownership")) {
      auto o = ownership_from_name(*asked);
      if (!o) {
        co_return S3Error::invalid_argument("x-amz-object-ownership", std::string(*asked),
                                            "Invalid x-amz-object-ownership header");
      }
      if (*o == ObjectOwnership::kBucketOwnerEnforced && !only_owner(*s3.new_acl)) {
        co_return invalid_bucket_acl_with_object_ownership();
      }
    }
    if (!exists) co_return std::nullopt;
    // Swift's _bucket_put_accepted_error(). (RGW also answers BucketAlreadyExists to its
    // owner when the request's ACL differs; AWS and Swift do not.)
    if (!is_owner(s3, s3.bucket_acl, account)) co_return errors::bucket_already_exists(s3.bucket);
    co_return errors::bucket_already_owned_by_you(s3.bucket);
  }
  if (!exists) co_return errors::no_such_bucket(s3.bucket);
  // x-amz-expected-bucket-owner: the request is for a bucket of that owner only.
  if (auto expected = s3.client.headers.get("x-amz-expected-bucket-owner");
      expected && (!s3.bucket_acl || s3.bucket_acl->owner != *expected)) {
    co_return S3Error::access_denied();
  }
  // A plain GET or HEAD of an object is checked on its own answer, which carries the object's
  // ACL (object.cpp): one request instead of a HEAD and then the GET.
  const bool plain_read =
      need.target == Target::kObject && need.permission == Permission::kRead &&
      !s3.has("partNumber") && !s3.has("attributes") && !s3.has("tagging") &&
      (s3.client.method == "GET" || s3.client.method == "HEAD");
  // The bucket policy first: its Deny wins over any grant, its Allow over the ACLs.
  if (auto policy = policy_from_sysmeta(info.headers, s3.bucket)) {
    s3.bucket_policy = std::move(policy);
    if (s3.has("delete")) {
      // DeleteObjects: the policy speaks of keys, so each key is decided on its own.
      s3.delete_by_acl = allowed(s3, s3.bucket_acl, account, Permission::kWrite);
      co_return std::nullopt;
    }
    const std::string action = policy_action(s3);
    PolicyEffect verdict =
        co_await policy_verdict(s3, *s3.bucket_policy, action, s3.bucket, s3.key, account);
    // The bucket's owner may always read, change and remove its policy (AWS's rule for the
    // account's root user), so that a policy that denies everyone can be undone.
    const bool owner_policy_call = action.find("BucketPolicy") != std::string::npos &&
                                   is_owner(s3, s3.bucket_acl, account);
    if (verdict == PolicyEffect::kDeny && !owner_policy_call) co_return S3Error::access_denied();
    if (verdict == PolicyEffect::kAllow) {
      s3.policy_allowed = true;
      // A missing object is still told only to who may list the bucket.
      if (plain_read) s3.object_read_check = ObjectReadCheck::kOnAnswer;
      co_return std::nullopt;
    }
  }
  switch (need.target) {
    case Target::kBucketOwner:
      if (is_owner(s3, s3.bucket_acl, account)) co_return std::nullopt;
      co_return S3Error::access_denied();
    case Target::kBucket:
      if (allowed(s3, s3.bucket_acl, account, need.permission)) co_return std::nullopt;
      co_return S3Error::access_denied();
    default:
      break;
  }
  if (plain_read) {
    s3.object_read_check = ObjectReadCheck::kOnAnswer;
    co_return std::nullopt;
  }
  co_return co_await check_object_access(s3, need.permission);
}

namespace {

// Whether the requester may list the bucket where its key would be: a READ grant on the bucket,
// or the policy's s3:ListBucket with s3:prefix the key (and no Deny of it).
net::awaitable<bool> may_list_key(S3Request& s3, const std::string& account) {
  if (s3.bucket_policy) {
    PolicyRequest request{.action = "s3:ListBucket", .resource = policy_resource(s3.bucket, {}),
                          .user = s3.user_id(),
                          .value_of = [&](std::string_view k) -> std::optional<std::vector<std::string>> {
                            if (k == "s3:prefix") return std::vector<std::string>{*s3.key};
                            return policy_value(s3, k, nullptr);
                          }};
    PolicyEffect verdict = s3.bucket_policy->evaluate(request);
    if (verdict == PolicyEffect::kDeny) co_return false;
    if (verdict == PolicyEffect::kAllow) co_return true;
  }
  co_return allowed(s3, s3.bucket_acl, account, Permission::kRead);
}

}  // namespace

net::awaitable<std::optional<S3Error>> check_object_access(S3Request& s3, Permission permission) {
  const std::string& account = bucket_account(s3);
  // The object's ACL, from its HEAD (of the version asked for).
  auto v = s3.params.find("versionId");
  std::string query =
      v == s3.params.end() ? "" : "version-id=" + common::http::quote(v->second, "");
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, query, 1 << 16,
                                  [&](HeaderMap& h) { h = own_headers(s3.client.headers); });
  if (auto* e = std::get_if<S3Error>(&head)) co_return std::move(*e);
  const Response& r = std::get<Response>(head);
  if (r.status == 404) {
    // Who may list the bucket may learn the key is not there (S3's rule); others may not.
    if (co_await may_list_key(s3, account)) co_return std::nullopt;
    co_return S3Error::access_denied();
  }
  if (r.status != 200) co_return unexpected(s3, r);
  if (s3.policy_allowed || allowed(s3, object_acl(r.headers), account, permission)) {
    co_return std::nullopt;
  }
  co_return S3Error::access_denied();
}

net::awaitable<std::optional<S3Error>> check_read_on_answer(S3Request& s3, int status,
                                                            const HeaderMap& swift) {
  if (s3.object_read_check != ObjectReadCheck::kOnAnswer) co_return std::nullopt;
  s3.object_read_check = ObjectReadCheck::kDone;
  // An object's answer carries its ACL; any other (a 304, 412, 416 or 404) may not, and is
  // given only to who may have it, as before the read.
  if (status == 200 || status == 206) {
    if (s3.policy_allowed || allowed(s3, object_acl(swift), bucket_account(s3), Permission::kRead)) {
      co_return std::nullopt;
    }
    co_return S3Error::access_denied();
  }
  co_return co_await check_object_access(s3, Permission::kRead);
}

net::awaitable<std::optional<S3Error>> check_post_access(S3Request& s3, const std::string& key,
                                                         const HeaderMap& acl_fields) {
  const std::string& account = bucket_account(s3);
  if (account.empty()) co_return errors::no_such_bucket(s3.bucket);
  CachedInfo info = co_await s3.config.info->container_info(account, s3.bucket, s3.client, s3.env);
  if (info.status == 404) co_return errors::no_such_bucket(s3.bucket);
  if (info.status < 200 || info.status >= 300) co_return errors::service_unavailable();
  s3.bucket_acl = decode_acl(info.headers.get_or(kBucketAclSysmeta, ""));
  s3.public_block = decode_public_access_block(info.headers.get_or(kPublicAccessBlockSysmeta, ""));
  s3.ownership = ownership_from_name(info.headers.get_or(kOwnershipSysmeta, ""))
                     .value_or(ObjectOwnership::kObjectWriter);
  // The bucket policy first, as for a PUT of the key: a Deny wins, an Allow does without the
  // bucket's WRITE grant.
  PolicyEffect verdict = PolicyEffect::kNone;
  if (auto policy = policy_from_sysmeta(info.headers, s3.bucket)) {
    s3.bucket_policy = std::move(policy);
    verdict = co_await policy_verdict(s3, *s3.bucket_policy, "s3:PutObject", s3.bucket, key,
                                      account);
  }
  if (verdict == PolicyEffect::kDeny ||
      (verdict == PolicyEffect::kNone && !allowed(s3, s3.bucket_acl, account, Permission::kWrite))) {
    co_return S3Error::access_denied();
  }
  if (auto e = plan_new_acl(s3, false, acl_fields)) co_return e;
  if (blocked(s3, *s3.new_acl)) co_return S3Error::access_denied();
  co_return std::nullopt;
}

net::awaitable<bool> may_list_bucket(S3Request& s3, const std::string& bucket) {
  const std::string& account = s3.requester_account();
  CachedInfo info = co_await s3.config.info->container_info(account, bucket, s3.client, s3.env);
  if (info.status < 200 || info.status >= 300) co_return false;
  co_return allowed(s3, decode_acl(info.headers.get_or(kBucketAclSysmeta, "")), account,
                    Permission::kRead);
}

net::awaitable<bool> may_read_copy_source(S3Request& s3, const std::string& bucket,
                                          const std::string& key, bool version,
                                          const HeaderMap& headers, const std::string& account) {
  if (!s3.config.s3_acl) co_return true;
  CachedInfo info = co_await s3.config.info->container_info(account, bucket, s3.client, s3.env);
  if (info.status >= 200 && info.status < 300) {
    if (auto policy = policy_from_sysmeta(info.headers, bucket)) {
      // The source's own bucket decides: its public access block, not the destination's.
      S3Request src{.client = s3.client, .env = s3.env, .next = s3.next, .config = s3.config,
                    .bucket = bucket, .key = key, .params = {}, .signature = s3.signature,
                    .acl_header_used = true, .bucket_accounts = s3.bucket_accounts};
      src.public_block =
          decode_public_access_block(info.headers.get_or(kPublicAccessBlockSysmeta, ""));
      PolicyEffect verdict = co_await policy_verdict(
          src, *policy, version ? "s3:GetObjectVersion" : "s3:GetObject", bucket, key, account);
      if (verdict == PolicyEffect::kDeny) co_return false;
      if (verdict == PolicyEffect::kAllow) co_return true;
    }
  }
  co_return allowed(s3, object_acl(headers), account, Permission::kRead);
}

bool policy_allows(const S3Request& s3, const std::string& action, const std::string& key) {
  if (!s3.bucket_policy) return false;
  PolicyRequest request{.action = action, .resource = policy_resource(s3.bucket, key),
                        .user = s3.user_id(), .value_of = [&](std::string_view k) {
                          return policy_value(s3, k, nullptr);
                        }};
  return s3.bucket_policy->evaluate(request) == PolicyEffect::kAllow;
}

bool may_delete_key(const S3Request& s3, const std::string& key,
                    const std::optional<std::string>& version) {
  if (!s3.delete_by_acl || !s3.bucket_policy) return true;
  PolicyRequest request{.action = version ? "s3:DeleteObjectVersion" : "s3:DeleteObject",
                        .resource = policy_resource(s3.bucket, key), .user = s3.user_id(),
                        .value_of = [&](std::string_view k) -> std::optional<std::vector<std::string>> {
                          if (k == "s3:versionid" && version) {
                            return std::vector<std::string>{*version};
                          }
                          return policy_value(s3, k, nullptr);
                        }};
  PolicyEffect verdict = s3.bucket_policy->evaluate(request);
  if (verdict == PolicyEffect::kDeny) return false;
  return verdict == PolicyEffect::kAllow || *s3.delete_by_acl;
}

void add_new_acl(const S3Request& s3, std::string_view sysmeta_name, HeaderMap& h) {
  if (!s3.config.s3_acl || !s3.new_acl) return;
  h.set(sysmeta_name, encode_acl(*s3.new_acl));
  // A copy must not bring its source's changed ACL along.
  if (sysmeta_name == kObjectAclSysmeta) h.set(kObjectAclTransient, "");
}

namespace {

// PUT ?acl's new ACL: from the headers or the body's document (one of them, as Swift's
// get_acl()); its owner must be the resource's.
net::awaitable<std::variant<Acl, S3Error>> requested_acl(Exchange& ex, S3Request& s3,
                                                         const std::string& bucket_owner,
                                                         const std::string& owner) {
  auto from_headers = acl_from_headers(s3.client.headers, bucket_owner, owner);
  if (auto* e = std::get_if<S3Error>(&from_headers)) co_return std::move(*e);
  auto read = co_await read_xml_body(ex, 200 * 1024);
  if (auto* e = std::get_if<S3Error>(&read)) co_return std::move(*e);
  const auto& body = std::get<std::optional<std::string>>(read);
  const bool has_body = body && !body->empty();
  auto& acl = std::get<std::optional<Acl>>(from_headers);
  if (acl) {
    if (has_body) {
      co_return S3Error{.status = 400, .code = "UnexpectedContent",
                        .message = "This request does not support content.", .details = {}};
    }
    co_return std::move(*acl);
  }
  if (!has_body) {
    co_return S3Error{.status = 400, .code = "MissingSecurityHeader",
                      .message = "Your request was missing a required header.",
                      .details = {{"MissingHeaderName", "x-amz-acl"}}};
  }
  auto parsed = parse_acl_document(*body);
  if (auto* e = std::get_if<S3Error>(&parsed)) co_return std::move(*e);
  Acl& doc = std::get<Acl>(parsed);
  if (doc.owner != owner) co_return S3Error::access_denied();
  co_return std::move(doc);
}

// Swift's S3AclController answers with swob's default type, for the ACL and for a PUT.
constexpr const char* kAnswerType = "text/html; charset=UTF-8";

Response acl_answer(const Acl& acl, const S3Request& s3) {
  Response out = xml_response(200, acl_document(acl), s3.env.trans_id);
  out.headers.set("Content-Type", kAnswerType);
  return out;
}

Response put_answer(const S3Request& s3, const std::string& version) {
  Response out;
  out.status = 200;
  out.headers.set("Content-Type", kAnswerType);
  if (!version.empty()) out.headers.set("x-amz-version-id", version);
  set_request_ids(out.headers, s3.env.trans_id);
  return out;
}

// The ACL to show for a resource that has none: its owner's grant alone, the owner being the
// bucket's (or the requester).
Acl implied_acl(const std::string& owner) { return *canned_acl("private", owner, owner); }

}  // namespace

net::awaitable<Response> s3_acl_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "PUT") {
    co_return s3.error(errors::method_not_allowed(method, "ACL"));
  }
  const std::string bucket_owner =
      s3.bucket_acl && !s3.bucket_acl->owner.empty() ? s3.bucket_acl->owner : s3.user_id();
  if (method == "PUT" && s3.ownership == ObjectOwnership::kBucketOwnerEnforced) {
    co_return s3.error(access_control_list_not_supported());
  }
  if (!s3.key) {
    if (method == "GET") {
      co_return acl_answer(s3.bucket_acl && !s3.bucket_acl->owner.empty()
                               ? *s3.bucket_acl
                               : implied_acl(bucket_owner),
                           s3);
    }
    auto acl = co_await requested_acl(ex, s3, bucket_owner, bucket_owner);
    if (auto* e = std::get_if<S3Error>(&acl)) co_return s3.error(*e);
    if (blocked(s3, std::get<Acl>(acl))) co_return s3.error(S3Error::access_denied());
    if (auto e = co_await set_bucket_sysmeta(s3, kBucketAclSysmeta, encode_acl(std::get<Acl>(acl)))) {
      co_return s3.error(*e);
    }
    co_return put_answer(s3, "");
  }
  auto v = s3.params.find("versionId");
  const std::string query =
      v == s3.params.end() ? "" : "version-id=" + common::http::quote(v->second, "");
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, query, 1 << 16,
                                  [&](HeaderMap& h) { h = own_headers(s3.client.headers); });
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& object = std::get<Response>(head);
  if (object.status == 404) co_return s3.error(co_await object_not_found(s3));
  if (object.status != 200) co_return s3.error(unexpected(s3, object));
  const std::string version(object.headers.get_or("X-Object-Version-Id", ""));
  std::optional<Acl> current = object_acl(object.headers);
  const std::string owner = current && !current->owner.empty() ? current->owner : bucket_owner;
  if (method == "GET") {
    Response out = acl_answer(current && !current->owner.empty() ? *current
                                                                 : implied_acl(owner),
                              s3);
    if (!version.empty()) out.headers.set("x-amz-version-id", version);
    co_return out;
  }
  auto acl = co_await requested_acl(ex, s3, bucket_owner, owner);
  if (auto* e = std::get_if<S3Error>(&acl)) co_return s3.error(*e);
  if (blocked(s3, std::get<Acl>(acl))) co_return s3.error(S3Error::access_denied());
  if (!query.empty()) {
    // Only the current version takes a POST (object_versioning passes it to it).
    auto latest = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, "", 1 << 16,
                                      [&](HeaderMap& h) { h = own_headers(s3.client.headers); });
    if (auto* e = std::get_if<S3Error>(&latest)) co_return s3.error(*e);
    const Response& l = std::get<Response>(latest);
    if (l.status != 200 || l.headers.get_or("X-Object-Version-Id", "") != version) {
      co_return s3.error(errors::not_implemented(
          "Changing the ACL of a version that is not the current one is not supported."));
    }
  }
  auto post = co_await call_swift(s3, "POST", s3.bucket, s3.key, "", 1 << 16, [&](HeaderMap& h) {
    h = own_headers(s3.client.headers);
    keep_object_metadata(object.headers, h);
    h.set(kObjectAclTransient, encode_acl(std::get<Acl>(acl)));
  });
  if (auto* e = std::get_if<S3Error>(&post)) co_return s3.error(*e);
  const Response& p = std::get<Response>(post);
  if (p.status == 404) co_return s3.error(co_await object_not_found(s3));
  if (p.status != 202 && p.status != 204) co_return s3.error(unexpected(s3, p));
  co_return put_answer(s3, version);
}

net::awaitable<Response> public_access_block_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    if (!s3.public_block) {
      co_return s3.error({.status = 404, .code = "NoSuchPublicAccessBlockConfiguration",
                          .message = "The public access block configuration was not found",
                          .details = {{"BucketName", s3.bucket}}});
    }
    co_return xml_response(200, public_access_block_document(*s3.public_block), s3.env.trans_id);
  }
  std::string stored;  // DELETE: none
  if (method == "PUT") {
    auto body = co_await read_configuration(ex, s3, 64 * 1024);
    if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
    auto parsed = parse_public_access_block(std::get<std::string>(body));
    if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
    stored = encode_public_access_block(std::get<PublicAccessBlock>(parsed));
  } else if (method != "DELETE") {
    co_return s3.error(errors::method_not_allowed(method, "PUBLICACCESSBLOCK"));
  }
  if (auto e = co_await set_bucket_sysmeta(s3, kPublicAccessBlockSysmeta, stored)) {
    co_return s3.error(*e);
  }
  co_return configuration_answer(s3);
}

net::awaitable<Response> ownership_controls_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    auto headers = co_await bucket_headers(s3);
    if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
    auto stored =
        ownership_from_name(std::get<HeaderMap>(headers).get_or(kOwnershipSysmeta, ""));
    if (!stored) {
      co_return s3.error({.status = 404, .code = "OwnershipControlsNotFoundError",
                          .message = "The bucket ownership controls were not found",
                          .details = {{"BucketName", s3.bucket}}});
    }
    co_return xml_response(200, ownership_controls_document(*stored), s3.env.trans_id);
  }
  std::string stored;  // DELETE: none
  if (method == "PUT") {
    auto body = co_await read_configuration(ex, s3, 64 * 1024);
    if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
    auto parsed = parse_ownership_controls(std::get<std::string>(body));
    if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
    const ObjectOwnership o = std::get<ObjectOwnership>(parsed);
    if (o == ObjectOwnership::kBucketOwnerEnforced && s3.bucket_acl && !only_owner(*s3.bucket_acl)) {
      co_return s3.error(invalid_bucket_acl_with_object_ownership());
    }
    stored = std::string(ownership_name(o));
  } else if (method != "DELETE") {
    co_return s3.error(errors::method_not_allowed(method, "OWNERSHIPCONTROLS"));
  }
  if (auto e = co_await set_bucket_sysmeta(s3, kOwnershipSysmeta, stored)) co_return s3.error(*e);
  co_return configuration_answer(s3);
}

}  // namespace apus::proxy::s3api
