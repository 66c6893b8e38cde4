#pragma once

// Test inputs shared by the splicer's tests: ConfigMaps as the materializer stores them.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "libs/redisstore/materialization_store.h"

namespace reverser::splicer::testutil {

// A ConfigMap's JSON with uid `uid-<name>` and `data: {<data_key>: <value>}`.
std::string ConfigMapJson(absl::string_view ns, absl::string_view name, absl::string_view value,
                          uint64_t rv, absl::string_view data_key = "k");

// A stream entry carrying ConfigMapJson (deletes too: the materializer stores the deleted object).
redisstore::StreamEntry ConfigMapEntry(absl::string_view ns, absl::string_view name,
                                       absl::string_view value, uint64_t rv,
                                       redisstore::ChangeOp op = redisstore::ChangeOp::kModified);

}  // namespace reverser::splicer::testutil
