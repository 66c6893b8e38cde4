#include "services/splicer/test_support.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace reverser::splicer::testutil {

std::string ConfigMapJson(absl::string_view ns, absl::string_view name, absl::string_view value,
                          uint64_t rv, absl::string_view data_key) {
  const std::string n(name);
  return nlohmann::json({{"apiVersion", "v1"},
                         {"kind", "ConfigMap"},
                         {"metadata",
                          {{"name", n},
                           {"namespace", std::string(ns)},
                           {"uid", "uid-" + n},
                           {"resourceVersion", std::to_string(rv)}}},
                         {"data", {{std::string(data_key), std::string(value)}}}})
      .dump();
}

redisstore::StreamEntry ConfigMapEntry(absl::string_view ns, absl::string_view name,
                                       absl::string_view value, uint64_t rv,
                                       redisstore::ChangeOp op) {
  redisstore::StreamEntry entry;
  entry.op = op;
  entry.uid = "uid-" + std::string(name);
  entry.namespace_ = std::string(ns);
  entry.name = std::string(name);
  entry.resource_version = std::to_string(rv);
  entry.object_json = ConfigMapJson(ns, name, value, rv);
  return entry;
}

}  // namespace reverser::splicer::testutil
