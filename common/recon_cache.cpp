#include "common/recon_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "common/io/fs.h"
#include "common/log/log.h"

namespace apus::common {

Status dump_recon_cache(const std::string& path, std::string_view entries) {
  boost::system::error_code ec;
  auto update = boost::json::parse(entries, ec);
  if (ec || !update.is_object()) return Status::invalid_argument("recon entries must be an object");
  // The file itself is the lock, as Swift's lock_file() takes it.
  int lock = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return io::from_errno(errno, "open " + path);
  ::flock(lock, LOCK_EX);
  boost::json::object cache;
  {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = boost::json::parse(text.str(), ec);
    if (!ec && parsed.is_object()) cache = std::move(parsed.as_object());
  }
  for (auto& [key, value] : update.as_object()) {
    auto it = cache.find(key);
    if (value.is_object() && it != cache.end() && it->value().is_object()) {
      for (auto& [k, v] : value.as_object()) it->value().as_object()[k] = v;
    } else {
      cache[key] = value;
    }
  }
  const std::string tmp = path + ".tmp";
  Status s;
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << boost::json::serialize(cache);
    if (!out) s = Status::io_error("cannot write " + tmp);
  }
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = io::from_errno(errno, "rename " + tmp);
  }
  ::close(lock);
  return s;
}

void write_recon_entry(const std::string& path, std::string_view key, double value) {
  boost::json::object entry;
  entry[key] = value;
  Status written = dump_recon_cache(path, boost::json::serialize(entry));
  if (!written.ok()) APUS_LOG_ERROR("cannot write the recon cache " + path + ": " + written.to_string());
}

}  // namespace apus::common
