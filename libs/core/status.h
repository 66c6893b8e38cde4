#pragma once

// Status helpers over absl::Status, in the style of Envoy's RETURN_IF_NOT_OK.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace reverser::core {

// Prefixes a status message with context ("reading kubeconfig: ..."), keeping its code and
// payloads.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace reverser::core

#define REVERSER_STATUS_CONCAT_INNER_(a, b) a##b
#define REVERSER_STATUS_CONCAT_(a, b) REVERSER_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                                           \
  do {                                                                  \
    if (::absl::Status _status = (expr); !_status.ok()) return _status; \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(REVERSER_STATUS_CONCAT_(_status_or_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(*tmp)
