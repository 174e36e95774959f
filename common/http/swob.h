// Swift's standard responses (swob): the title and explanation Swift's servers put in the body
// of an error response, `<html><h1>{title}</h1><p>{explanation}</p></html>`. Clients and
// Swift's functional tests compare these bodies, so every Apus server builds its error answers
// here.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/http/server.h"

namespace apus::common::http {

// Swift's explanation for `status` ("The resource could not be found."), or "" when none.
std::string_view swob_explanation(int status);

// A response with Swift's default body for `status`: the HTML page when the status has an
// explanation (507 names `drive`), else an empty body. Content-Type is text/html; charset=UTF-8
// whatever the body, as swob sets it by default.
Response swob_response(int status, std::string_view drive = {});

// swob's status_map[status](body=...): swob's default Content-Type with `body` instead of the
// explanation page (HTTPBadRequest('...') and friends).
Response swob_response_with_body(int status, std::string body);

// A response with `body` as text/plain, as Swift's servers send for validation errors.
Response text_response(int status, std::string body);

// swob's Request.as_referer(): "<METHOD> http://<Host><quoted path>", the Referer a storage
// server puts on the requests it sends on behalf of `req`.
std::string as_referer(const Request& req);

}  // namespace apus::common::http
