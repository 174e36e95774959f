// What every proxy controller shares (proxy/controllers/base.h): the X-Remove-* translation
// of Swift's transfer_headers(), the owner-only headers, and a failed constraint check as the
// refusal Swift answers with.
#include "proxy/controllers/base.h"

#include <doctest/doctest.h>

namespace apus::proxy {
namespace {

using common::http::HeaderMap;

TEST_CASE("apply_removes turns X-Remove-Account-Meta into an empty account meta header") {
  HeaderMap h;
  h.set("X-Remove-Account-Meta-Color", "x");
  h.set("X-Account-Meta-Size", "big");
  apply_removes(h, "account");
  CHECK(h.get("X-Account-Meta-Color") == std::optional<std::string_view>(""));
  CHECK_FALSE(h.contains("X-Remove-Account-Meta-Color"));
  CHECK(h.get_or("X-Account-Meta-Size", "") == "big");
}

TEST_CASE("apply_removes never turns X-Remove-Account-Sysmeta into a removal") {
  HeaderMap h;
  h.set("X-Remove-Account-Sysmeta-Core-Access-Control", "x");
  apply_removes(h, "account");
  CHECK_FALSE(h.contains("X-Account-Sysmeta-Core-Access-Control"));
  CHECK(h.contains("X-Remove-Account-Sysmeta-Core-Access-Control"));
}

TEST_CASE("apply_removes knows the fixed container removals, and only for containers") {
  HeaderMap container;
  container.set("X-Remove-Container-Read", "x");
  container.set("X-Remove-History-Location", "x");
  apply_removes(container, "container");
  CHECK(container.get("X-Container-Read") == std::optional<std::string_view>(""));
  CHECK(container.get("X-History-Location") == std::optional<std::string_view>(""));

  HeaderMap account;
  account.set("X-Remove-Container-Read", "x");
  apply_removes(account, "account");
  CHECK_FALSE(account.contains("X-Container-Read"));
}

TEST_CASE("remove_owner_headers drops ACLs, sync keys and temp URL keys") {
  HeaderMap h;
  h.set("X-Container-Read", ".r:*");
  h.set("X-Container-Sync-Key", "secret");
  h.set("X-Account-Meta-Temp-URL-Key", "k");
  h.set("X-Account-Access-Control", "{}");
  h.set("X-Container-Meta-Color", "blue");
  remove_owner_headers(h);
  CHECK(h.size() == 1);
  CHECK(h.get_or("X-Container-Meta-Color", "") == "blue");
}

TEST_CASE("refusal gives nothing for a passed check and Swift's text answer for a failed one") {
  CHECK_FALSE(refusal(common::CheckResult::pass()).has_value());
  auto r = refusal(common::CheckResult::fail(413, "Your request is too large."));
  REQUIRE(r.has_value());
  CHECK(r->status == 413);
  CHECK(r->body == "Your request is too large.");
  CHECK(r->headers.get_or("Content-Type", "").starts_with("text/plain"));
}

}  // namespace
}  // namespace apus::proxy
