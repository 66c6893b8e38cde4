#include "services/gitworker/refusal.h"

#include "absl/strings/str_cat.h"
#include "libs/core/proto_convert.h"

namespace reverser::gitworker {

std::string Refusal::What() const {
  switch (subject) {
    case Subject::kObject: {
      const std::string type = gvr.resource.empty() ? kind : gvr.ToString();
      return namespace_.empty() ? absl::StrCat(type, " ", name)
                                : absl::StrCat(type, " ", namespace_, "/", name);
    }
    case Subject::kFile:
      return absl::StrCat("file ", path, " (blob ", blob_id, ")");
    case Subject::kTemplate:
      return absl::StrCat(template_kind, " commit template");
  }
  return "";
}

std::string Refusal::Text() const { return absl::StrCat(What(), ": ", message); }

Refusal RefuseObject(const reverser::v1::ObjectBody& object, absl::string_view reason,
                     absl::string_view message) {
  Refusal refusal;
  refusal.subject = Refusal::Subject::kObject;
  refusal.reason = std::string(reason);
  refusal.message = std::string(message);
  refusal.gvr = core::FromProto(object.ref().gvr());
  refusal.kind = object.gvk().kind();
  refusal.namespace_ = object.ref().namespace_();
  refusal.name = object.ref().name();
  return refusal;
}

}  // namespace reverser::gitworker
