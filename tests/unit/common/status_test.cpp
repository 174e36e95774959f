#include "common/status.h"

#include <memory>
#include <string>

#include <doctest/doctest.h>

namespace apus::common {
namespace {

Status fail_if(bool fail) { return fail ? Status::io_error("disk on fire") : Status(); }

Status propagate(bool fail, int* reached) {
  APUS_RETURN_IF_ERROR(fail_if(fail));
  ++*reached;
  return Status();
}

TEST_CASE("status: OK by default") {
  Status s;
  CHECK(s.ok());
  CHECK(s.code() == Status::Code::kOk);
  CHECK(s.message().empty());
  CHECK(s.to_string() == "OK");
  CHECK(Status::ok_status().ok());
  CHECK(to_http_status(s) == 200);
}

TEST_CASE("status: factories, predicates and to_string") {
  Status nf = Status::not_found("no such object");
  CHECK_FALSE(nf.ok());
  CHECK(nf.is_not_found());
  CHECK_FALSE(nf.is_timeout());
  CHECK(nf.message() == "no such object");
  CHECK(nf.to_string() == "NotFound: no such object");
  CHECK(Status::timeout().is_timeout());
  CHECK(Status::cancelled().is_cancelled());
  CHECK(Status::invalid_argument("x").to_string() == "InvalidArgument: x");
  CHECK(Status::corruption().to_string() == "Corruption");
  // Equality compares codes only.
  CHECK(Status::conflict("a") == Status::conflict("b"));
  CHECK_FALSE(Status::conflict("a") == Status::not_found("a"));
}

TEST_CASE("status: to_http_status maps each code") {
  CHECK(to_http_status(Status::not_found()) == 404);
  CHECK(to_http_status(Status::conflict()) == 409);
  CHECK(to_http_status(Status::precondition_failed()) == 412);
  CHECK(to_http_status(Status::insufficient_storage()) == 507);
  CHECK(to_http_status(Status::timeout()) == 408);
  CHECK(to_http_status(Status::io_error()) == 500);
  CHECK(to_http_status(Status::corruption()) == 500);
  CHECK(to_http_status(Status::invalid_argument()) == 400);
  CHECK(to_http_status(Status::unavailable()) == 503);
  CHECK(to_http_status(Status::cancelled()) == 499);
}

TEST_CASE("status: Result holds a value or a failure") {
  Result<std::string> good = std::string("value");
  REQUIRE(good.ok());
  CHECK(static_cast<bool>(good));
  CHECK(*good == "value");
  CHECK(good->size() == 5);
  CHECK(good.status().ok());
  good.value() += "!";
  CHECK(good.value() == "value!");

  Result<std::string> bad = Status::unavailable("try later");
  CHECK_FALSE(bad.ok());
  CHECK_FALSE(static_cast<bool>(bad));
  CHECK(bad.status().code() == Status::Code::kUnavailable);
  CHECK(bad.status().message() == "try later");

  // Move-only values move out.
  Result<std::unique_ptr<int>> owned = std::make_unique<int>(7);
  std::unique_ptr<int> p = std::move(owned).value();
  REQUIRE(p != nullptr);
  CHECK(*p == 7);
}

TEST_CASE("status: APUS_RETURN_IF_ERROR stops at the first failure") {
  int reached = 0;
  CHECK(propagate(false, &reached).ok());
  CHECK(reached == 1);
  Status s = propagate(true, &reached);
  CHECK(s.code() == Status::Code::kIOError);
  CHECK(s.message() == "disk on fire");
  CHECK(reached == 1);
}

}  // namespace
}  // namespace apus::common
