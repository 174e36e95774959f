// Async pendings: container updates saved for later (swift-protocol.md §7.6).
//
// When a container server cannot be told about an object change right away (or
// container_update_mode = async), the object server writes the update to
// <dev>/async_pending[-N]/<suffix>/<hash>-<timestamp> as Swift does: a protocol-0 pickle of
// {'op', 'account', 'container', 'obj', 'headers', ['container_path', 'successes',
// 'redirect_history']}, so that Swift's
// swift-object-updater and apus-object-updater can both deliver it.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace apus::object {

struct AsyncUpdate {
  std::string op;  // "PUT" or "DELETE"
  std::string account, container, obj;  // UTF-8 names
  // Update headers as (name, wire bytes) pairs; names title-cased as Swift's HeaderKeyDict.
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> container_path;  // "a/c" of a shard to send it to instead
  std::vector<int64_t> successes;  // container node ids that already took it (the updater's)
  // The shard paths the updater was redirected to, in order (a loop sends it back to the root).
  std::vector<std::string> redirect_history;
};

// The protocol-0 pickle Swift writes. Header values are stored as Swift's WSGI strings (one
// code point per wire byte); names are real Unicode.
std::string encode_async_pending(const AsyncUpdate& update);

// Reads an async pending written by Swift or Apus. Corruption for anything else.
common::Result<AsyncUpdate> decode_async_pending(std::string_view pickled);

}  // namespace apus::object
