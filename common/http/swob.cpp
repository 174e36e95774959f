#include "common/http/swob.h"

#include "common/http/url.h"

namespace apus::common::http {

std::string_view swob_explanation(int status) {
  switch (status) {
    case 202: return "The request is accepted for processing.";
    case 301: return "The resource has moved permanently.";
    case 302: return "The resource has moved temporarily.";
    case 303: return "The response to the request can be found under a different URI.";
    case 307: return "The resource has moved temporarily.";
    case 400:
      return "The server could not comply with the request since it is either malformed or "
             "otherwise incorrect.";
    case 401:
      return "This server could not verify that you are authorized to access the document you "
             "requested.";
    case 402: return "Access was denied for financial reasons.";
    case 403: return "Access was denied to this resource.";
    case 404: return "The resource could not be found.";
    case 405: return "The method is not allowed for this resource.";
    case 406: return "The resource is not available in a format acceptable to your browser.";
    case 408: return "The server has waited too long for the request to be sent by the client.";
    case 409: return "There was a conflict when trying to complete your request.";
    case 410: return "This resource is no longer available.";
    case 411: return "Content-Length header required.";
    case 412: return "A precondition for this request was not met.";
    case 413: return "The body of your request was too large for this server.";
    case 414: return "The request URI was too long for this server.";
    case 415: return "The request media type is not supported by this server.";
    case 416: return "The Range requested is not available.";
    case 417: return "Expectation failed.";
    case 422: return "Unable to process the contained instructions";
    case 499: return "The client was disconnected during request.";
    case 500:
      return "The server has either erred or is incapable of performing the requested operation.";
    case 501: return "The requested method is not implemented by this server.";
    case 502: return "Bad gateway.";
    case 503: return "The server is currently unavailable. Please try again at a later time.";
    case 504: return "A timeout has occurred speaking to a backend server.";
    case 507: return "There was not enough space to save the resource. Drive: ";
    default: return "";
  }
}

Response swob_response(int status, std::string_view drive) {
  Response r;
  r.status = status;
  // swob gives every response this type unless told otherwise, bodiless 201s and 204s too.
  r.headers.set("Content-Type", "text/html; charset=UTF-8");
  std::string_view explanation = swob_explanation(status);
  if (!explanation.empty()) {
    r.body.reserve(64 + explanation.size());
    r.body.append("<html><h1>").append(reason_phrase(status)).append("</h1><p>");
    r.body.append(explanation);
    if (status == 507) r.body.append(drive);
    r.body.append("</p></html>");
  }
  return r;
}

Response swob_response_with_body(int status, std::string body) {
  Response r = swob_response(status);
  r.body = std::move(body);
  return r;
}

Response text_response(int status, std::string body) {
  Response r;
  r.status = status;
  r.headers.set("Content-Type", "text/plain");
  r.body = std::move(body);
  return r;
}

std::string as_referer(const Request& req) {
  return req.method + " http://" + std::string(req.headers.get_or("Host", "localhost")) +
         quote(percent_decode(req.path()));
}

}  // namespace apus::common::http
