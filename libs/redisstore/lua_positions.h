#pragma once

// Lua helpers (prepended to scripts) that compare stream positions `<rv>-<seq>` exactly.
// Redis Lua numbers are doubles (exact only below 2^53) and seq can be 2^64-1, so positions are
// compared as canonical decimal strings: shorter is smaller, equal length compares bytewise.
// A bare `<rv>` reads as `<rv>-0`. Positions written by this library never have leading zeros.

#include "absl/strings/string_view.h"

namespace reverser::redisstore::internal {

inline constexpr absl::string_view kLuaPositionHelpers = R"lua(
local function cmpnum(a, b)
  if #a ~= #b then
    if #a < #b then return -1 else return 1 end
  end
  if a == b then return 0 end
  if a < b then return -1 else return 1 end
end
local function split(id)
  local d = string.find(id, '-', 1, true)
  if not d then return id, '0' end
  return string.sub(id, 1, d - 1), string.sub(id, d + 1)
end
local function cmpid(a, b)
  local ar, as = split(a)
  local br, bs = split(b)
  local c = cmpnum(ar, br)
  if c ~= 0 then return c end
  return cmpnum(as, bs)
end
)lua";

}  // namespace reverser::redisstore::internal
