#include "object-server/async_pending.h"

#include "common/pickle.h"

namespace apus::object {

namespace pickle = common::pickle;
using common::Result;
using common::Status;

namespace {

// Wire bytes as a Python "WSGI string": one code point per byte, which is UTF-8 for the pickle.
std::string wsgi_to_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

// The reverse; strings with code points above 0xFF are kept as UTF-8.
std::string utf8_to_wsgi(const std::string& utf8) {
  std::string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c & 0xE0) == 0xC0 && c <= 0xC3 && i + 1 < utf8.size()) {
      out.push_back(static_cast<char>(((c & 0x1F) << 6) | (utf8[i + 1] & 0x3F)));
      ++i;
    } else {
      return utf8;
    }
  }
  return out;
}

const std::string* text_of(const pickle::Value* v) {
  if (!v || !(v->is_str() || v->is_bytes())) return nullptr;
  return &v->as_string();
}

}  // namespace

std::string encode_async_pending(const AsyncUpdate& update) {
  pickle::Value headers = pickle::Value::dict();
  for (const auto& [name, value] : update.headers) {
    headers.set(pickle::Value::str(wsgi_to_utf8(name)), pickle::Value::str(wsgi_to_utf8(value)));
  }
  pickle::Value data = pickle::Value::dict();
  data.set(pickle::Value::str("op"), pickle::Value::str(update.op));
  data.set(pickle::Value::str("account"), pickle::Value::str(update.account));
  data.set(pickle::Value::str("container"), pickle::Value::str(update.container));
  data.set(pickle::Value::str("obj"), pickle::Value::str(update.obj));
  data.set(pickle::Value::str("headers"), std::move(headers));
  if (update.container_path) {
    data.set(pickle::Value::str("container_path"), pickle::Value::str(*update.container_path));
  }
  if (!update.successes.empty()) {
    pickle::Value::List ids;
    for (int64_t id : update.successes) ids.push_back(pickle::Value::integer(id));
    data.set(pickle::Value::str("successes"), pickle::Value::list(std::move(ids)));
  }
  if (!update.redirect_history.empty()) {
    pickle::Value::List paths;
    for (const std::string& p : update.redirect_history) paths.push_back(pickle::Value::str(p));
    data.set(pickle::Value::str("redirect_history"), pickle::Value::list(std::move(paths)));
  }
  return pickle::dumps(data, 0);
}

Result<AsyncUpdate> decode_async_pending(std::string_view pickled) {
  auto value = pickle::loads(pickled);
  if (!value.ok()) return value.status();
  if (!value->is_dict()) return Status::corruption("async pending is not a dict");
  AsyncUpdate out;
  const std::string* op = text_of(value->find("op"));
  const std::string* account = text_of(value->find("account"));
  const std::string* container = text_of(value->find("container"));
  const std::string* obj = text_of(value->find("obj"));
  const pickle::Value* headers = value->find("headers");
  if (!op || !account || !container || !obj || !headers || !headers->is_dict()) {
    return Status::corruption("async pending misses op, account, container, obj or headers");
  }
  out.op = *op;
  out.account = *account;
  out.container = *container;
  out.obj = *obj;
  for (const auto& [k, v] : headers->as_dict()) {
    const std::string* name = text_of(&k);
    if (!name) continue;
    std::string val;
    if (v.is_str() || v.is_bytes()) {
      val = utf8_to_wsgi(v.as_string());
    } else if (v.is_int()) {
      val = std::to_string(v.as_int());  // Swift 2.x once stored the policy index as an int
    } else {
      continue;
    }
    out.headers.emplace_back(utf8_to_wsgi(*name), std::move(val));
  }
  if (const std::string* path = text_of(value->find("container_path"))) out.container_path = *path;
  if (const pickle::Value* ids = value->find("successes"); ids && (ids->is_list() || ids->is_tuple())) {
    for (const auto& id : ids->as_list()) {
      if (id.is_int()) out.successes.push_back(id.as_int());
    }
  }
  if (const pickle::Value* paths = value->find("redirect_history");
      paths && (paths->is_list() || paths->is_tuple())) {
    for (const auto& p : paths->as_list()) {
      if (const std::string* path = text_of(&p)) out.redirect_history.push_back(*path);
    }
  }
  return out;
}

}  // namespace apus::object
