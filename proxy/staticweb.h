// staticweb: Swift's static web middleware (egg:swift#staticweb). For anonymous GET and HEAD
// requests (and authenticated ones with X-Web-Mode: true), a container whose metadata asks for
// it is served as a web site: X-Container-Meta-Web-Index names the index object of every
// (pseudo-)directory, -Web-Error the suffix of the error pages (<status><suffix>, for 401 and
// 404), -Web-Listings turns on HTML listings of directories without an index, styled by
// -Web-Listings-CSS or an inline style and titled with -Web-Listings-Label, and
// -Web-Directory-Type names the content type of directory markers (application/directory by
// default), which are served as directories. A directory asked for without its trailing slash
// is redirected (301) to the path with it.
//
// The reference is Swift 2.30.1 where 2.35 differs: HTML 4.01 pages, links without "./", no
// temp_url_prefix listings. The only option is Swift's url_base, whose scheme and host (when
// given) make the redirects' Location.
//
// One deliberate difference: where Swift hands a HEAD the body of a GET subrequest (an error
// page, a refused listing), its catch_errors finds bytes in a HEAD answer and Swift answers 500;
// Apus answers the status and headers that GET has, without the body.
//
// The functions in namespace `staticweb` are the pure parts (the pages, the paths, the
// redirect's Location), exposed for tests. The middleware is built by make_staticweb().
//
// Pure functions: thread-safe. The middleware keeps only its config (thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The staticweb middleware from its [filter:...] section (url_base; bind_ip and bind_port of
// [DEFAULT] stand for the server's address in a redirect answering a request without Host).
common::Result<std::unique_ptr<Middleware>> make_staticweb(const common::Section& section,
                                                           const MiddlewareContext& context);

namespace staticweb {

// What a container's metadata asks of staticweb (Swift reads each value stripped).
struct WebConfig {
  std::string index;           // X-Container-Meta-Web-Index
  std::string error;           // X-Container-Meta-Web-Error
  std::string listings;        // X-Container-Meta-Web-Listings (on when config_true_value)
  std::string listings_css;    // X-Container-Meta-Web-Listings-CSS
  std::string listings_label;  // X-Container-Meta-Web-Listings-Label
  std::string dir_type;        // X-Container-Meta-Web-Directory-Type
};

// The WebConfig of a container whose info (HEAD headers) is `headers`.
WebConfig web_config(const common::http::HeaderMap& headers);

// Python's html.escape(s, quote=True): & < > " ' as &amp; &lt; &gt; &quot; &#x27;.
std::string html_escape(std::string_view s);

// Swift's human_readable(): 1536 -> "2Ki", rounding each step half to even as Python does.
std::string human_readable(double value);

// Swift's _build_css_path(): an absolute path or http(s) URL quoted (':' and '/' kept), else
// "../" for each '/' of `prefix` (the listed pseudo-directory) before the quoted name.
std::string css_path(std::string_view css, std::string_view prefix);

// The "Listing of ..." label of the decoded request path `path`: the path itself, or
// "<listings_label>/<what follows the container>" when the container sets a label.
std::string listing_label(std::string_view path, std::string_view listings_label);

// The 404 page of a directory when listings are off: `label` escaped, the CSS link or the
// inline style, and a note naming `index` when the container sets one. (`index` is the
// container owner's own metadata and goes in as Swift puts it: whoever may set it may as well
// upload any page to the site.)
std::string listing_disabled_page(std::string_view label, std::string_view css,
                                  std::string_view prefix, std::string_view index);

// The HTML listing of the JSON container listing `json` (delimiter "/", `prefix` the listed
// pseudo-directory, "" for the container): subdirectories first, then objects, names shown
// after `prefix`, quoted in links and escaped in text. nullopt when `json` is not a JSON array
// of listing entries (Swift's listing then fails: 500).
std::optional<std::string> listing_page(std::string_view json, std::string_view label,
                                        std::string_view css, std::string_view prefix);

// Whether the body of a listing answer holds at least one entry (Swift: a non-empty JSON
// value that is not false); nullopt when it is not JSON.
std::optional<bool> listing_has_entries(std::string_view json);

// url_base as Swift reads it (urlparse): its scheme and host, each empty when not given.
struct UrlBase {
  std::string scheme;
  std::string host;
};
UrlBase parse_url_base(std::string_view url_base);

// The absolute Location of the redirect that adds a slash to the decoded path `path`, as swob
// makes it: <scheme>://<host><quoted path>/, the scheme from url_base or http, the host from
// url_base, else the request's Host, else `server` (the server's own address), without the
// scheme's default port.
std::string slash_location(std::string_view path, const UrlBase& base,
                           std::optional<std::string_view> host, std::string_view server);

}  // namespace staticweb
}  // namespace apus::proxy
