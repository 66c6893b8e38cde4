#pragma once

// Who a commit names (docs/behaviour.md, Commit identities): the committer is always the
// operator; the author is the resolved actor, with display name and email derived from the
// username and the OIDC claims the audit event carried.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace reverser::commitmeta {

inline constexpr char kDefaultCommitterName[] = "GitOps Reverser";
inline constexpr char kDefaultCommitterEmail[] = "noreply@configbutler.ai";

// user.extra keys carrying OIDC claims (each a list; the first value is used).
inline constexpr char kDisplayNameClaim[] = "configbutler.ai/claims/display-name";
inline constexpr char kEmailClaim[] = "configbutler.ai/claims/email";

// The domain of constructed author emails: `<clean-username>@noreply.cluster.local`.
inline constexpr char kConstructedEmailDomain[] = "cluster.local";

struct Signature {
  std::string name;
  std::string email;
  bool operator==(const Signature&) const = default;
};

// The operator identity, `GitOps Reverser <noreply@configbutler.ai>` unless configured.
Signature DefaultCommitter();

// The actor behind a change, as the audit log names it.
struct Actor {
  std::string username;
  std::string display_name;  // OIDC display name claim, may be empty
  std::string email;         // OIDC email claim, may be empty

  // Builds an actor from an audit user (username + `extra`), reading the two claims.
  static Actor FromUserInfo(std::string username,
                            const std::map<std::string, std::vector<std::string>>& extra);
};

// The author signature: the committer when there is no actor or its username is empty,
// otherwise {AuthorName(actor), AuthorEmail(actor)}.
Signature AuthorFor(const std::optional<Actor>& actor, const Signature& committer);

// The display name (trimmed) when non-empty and safe for a Git signature header (no `<`, `>`
// or control characters), else the username — without those characters when it has any (a
// signature cannot hold them, and one unusable author must not fail a whole commit), or
// "unknown-user" when nothing remains.
std::string AuthorName(const Actor& actor);

// The email claim (trimmed) when it is a valid address, else ConstructSafeEmail(username).
std::string AuthorEmail(const Actor& actor);

// A Git-safe address for a username: the username itself when it is already a valid email;
// else the lower-cased username with every character outside [a-z0-9.-] removed (empty ⇒
// `unknown-user`), at `noreply.<domain>`. E.g.
// `system:serviceaccount:flux-system:kustomize-controller` →
// `systemserviceaccountflux-systemkustomize-controller@noreply.cluster.local`.
std::string ConstructSafeEmail(absl::string_view username,
                               absl::string_view domain = kConstructedEmailDomain);

// `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`, the reference's email check.
bool IsValidEmail(absl::string_view text);

// False if `text` holds `<`, `>` or a Unicode control character (C0, DEL, C1).
bool IsSafeSignatureField(absl::string_view text);

}  // namespace reverser::commitmeta
