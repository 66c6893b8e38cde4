#include "libs/git/bulk_writer.h"

#include <git2/sys/odb_backend.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::git {
namespace {

// Checked before the loose (1) and packed (2) backends, so every write lands here.
constexpr int kPriority = 1000;

// A libgit2 object database backend over a PackWriter. libgit2 owns the struct (it calls
// `free` when the handle's object database goes away); the PackWriter belongs to the BulkWriter.
struct PackBackend {
  git_odb_backend base;  // first: libgit2 passes &base around
  PackWriter* pack;

  static PackWriter& Of(git_odb_backend* backend) {
    return *reinterpret_cast<PackBackend*>(backend)->pack;
  }

  static int Fail(const absl::Status& status) {
    git_error_set_str(GIT_ERROR_ODB, std::string(status.message()).c_str());
    return -1;
  }

  static int Read(void** data, size_t* len, git_object_t* type, git_odb_backend* backend,
                  const git_oid* id) {
    PackWriter& pack = Of(backend);
    if (!pack.Contains(*id)) return GIT_ENOTFOUND;
    absl::StatusOr<std::string> content = pack.Read(*id, type);
    if (!content.ok()) return Fail(content.status());
    *data = git_odb_backend_data_alloc(backend, content->size() + 1);
    if (*data == nullptr) return -1;
    std::memcpy(*data, content->data(), content->size());
    static_cast<char*>(*data)[content->size()] = '\0';
    *len = content->size();
    return 0;
  }

  static int ReadHeader(size_t* len, git_object_t* type, git_odb_backend* backend,
                        const git_oid* id) {
    auto header = Of(backend).Header(*id);
    if (!header.has_value()) return GIT_ENOTFOUND;
    *type = header->first;
    *len = header->second;
    return 0;
  }

  static int Write(git_odb_backend* backend, const git_oid* id, const void* data, size_t len,
                   git_object_t type) {
    absl::Status status =
        Of(backend).Add(*id, type, absl::string_view(static_cast<const char*>(data), len));
    return status.ok() ? 0 : Fail(status);
  }

  static int Exists(git_odb_backend* backend, const git_oid* id) {
    return Of(backend).Contains(*id) ? 1 : 0;
  }

  // 0 = "exists (and is fresh)": a pack being written is as fresh as it gets.
  static int Freshen(git_odb_backend* backend, const git_oid* id) {
    return Of(backend).Contains(*id) ? 0 : 1;
  }

  static int Foreach(git_odb_backend*, git_odb_foreach_cb, void*) {
    // Nothing is visible to enumeration until the pack is installed.
    return 0;
  }

  static void Free(git_odb_backend* backend) { delete reinterpret_cast<PackBackend*>(backend); }
};

}  // namespace

BulkWriter::BulkWriter(std::unique_ptr<PackWriter> pack, GitPtr<git_repository> handle)
    : pack_(std::move(pack)), handle_(std::move(handle)) {}

BulkWriter::~BulkWriter() { handle_.reset(); }

absl::StatusOr<std::unique_ptr<BulkWriter>> BulkWriter::Begin(git_repository* repo) {
  const std::string path = git_repository_path(repo);
  git_repository* raw = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_open_bare(&raw, path.c_str()),
                            absl::StrCat("opening ", path, " for a bulk write")));
  GitPtr<git_repository> handle(raw);
  ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack,
                   PackWriter::Create(absl::StrCat(path, "objects/pack")));

  auto* backend = new PackBackend{};
  if (git_odb_init_backend(&backend->base, GIT_ODB_BACKEND_VERSION) < 0) {
    delete backend;
    return GitStatus(-1, "initialising the pack backend");
  }
  backend->pack = pack.get();
  backend->base.read = &PackBackend::Read;
  backend->base.read_header = &PackBackend::ReadHeader;
  backend->base.write = &PackBackend::Write;
  backend->base.exists = &PackBackend::Exists;
  backend->base.freshen = &PackBackend::Freshen;
  backend->base.foreach = &PackBackend::Foreach;
  backend->base.free = &PackBackend::Free;

  git_odb* odb = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_odb(&odb, handle.get()), "opening the object database"));
  int rc = git_odb_add_backend(odb, &backend->base, kPriority);
  if (rc < 0) backend->base.free(&backend->base);
  git_odb_free(odb);  // the handle keeps its own reference
  RETURN_IF_ERROR(GitStatus(rc, "adding the pack backend"));
  return std::unique_ptr<BulkWriter>(new BulkWriter(std::move(pack), std::move(handle)));
}

absl::StatusOr<std::optional<std::string>> BulkWriter::Commit(git_repository* main) {
  if (!handle_) return absl::FailedPreconditionError("bulk write already committed");
  handle_.reset();
  ASSIGN_OR_RETURN(std::optional<std::string> checksum, pack_->Finish());
  if (checksum.has_value()) {
    git_odb* odb = nullptr;
    RETURN_IF_ERROR(GitStatus(git_repository_odb(&odb, main), "opening the object database"));
    int rc = git_odb_refresh(odb);
    git_odb_free(odb);
    RETURN_IF_ERROR(GitStatus(rc, "refreshing the object database"));
  }
  return checksum;
}

}  // namespace reverser::git
