#pragma once

// Why the gitworker does not write an object (or a commit template's message) or does not read a
// file in Git. Every refusal leaves the worker through BranchWorker::Refuse: logged naming what
// was refused, counted by reason, and sent back on the delivery stream as `rejected`.

#include <string>

#include "absl/strings/string_view.h"
#include "libs/core/types.h"
#include "proto/reverser/v1/gitworker.pb.h"

namespace reverser::gitworker {

// Stable codes for why something is not written or read (metric labels, `rejected` feedback,
// the GitTarget's status).
inline constexpr char kReasonInvalidObject[] = "invalid-object";  // no operation, bad JSON
inline constexpr char kReasonInvalidPath[] = "invalid-path";      // unsafe identity, placement
inline constexpr char kReasonSensitiveWithoutEncryption[] = "sensitive-without-encryption";
inline constexpr char kReasonEncryptionFailed[] = "encryption-failed";
inline constexpr char kReasonRenderFailed[] = "render-failed";  // not a writable manifest
inline constexpr char kReasonNestedTooDeeply[] = "nested-too-deeply";
inline constexpr char kReasonObjectTooLarge[] = "object-too-large";
inline constexpr char kReasonCommitRefused[] = "commit-refused";  // the tree refused the write
inline constexpr char kReasonRefusedFileInTheWay[] = "refused-file-in-the-way";
inline constexpr char kReasonInternalError[] = "internal-error";  // an exception, caught
inline constexpr char kReasonFileTooLarge[] = "file-too-large";   // a file in Git
inline constexpr char kReasonYamlLimits[] = "yaml-limits";        // a file in Git
inline constexpr char kReasonTemplateFailed[] = "template-failed";  // a commit template

// Something not written (an object, a commit template) or not read (a file in Git), and why.
struct Refusal {
  enum class Subject { kObject, kFile, kTemplate };
  Subject subject = Subject::kObject;
  std::string reason;   // one of the kReason* codes
  std::string message;  // for people: what is wrong (What() names what was refused)
  // kObject: the object.
  core::GroupVersionResource gvr;
  std::string kind;
  std::string namespace_;
  std::string name;
  // kFile: the file and its content's blob id; kObject: the file in the way, if that is why.
  std::string path;
  std::string blob_id;
  // kTemplate: which template (event | group | reconcile).
  std::string template_kind;

  // What was refused: "<group/version/resource> namespace/name", "file <path> (blob <id>)" or
  // "<kind> commit template".
  std::string What() const;
  // What(), then the message: the text of the `rejected` feedback.
  std::string Text() const;
};

// A refusal of `object` for `reason`.
Refusal RefuseObject(const reverser::v1::ObjectBody& object, absl::string_view reason,
                     absl::string_view message);

}  // namespace reverser::gitworker
