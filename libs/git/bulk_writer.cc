#include "libs/git/bulk_writer.h"

#include <git2/sys/odb_backend.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::git {
namespace {

// The pack is asked first, so every write lands in it; the repository's objects come second.
constexpr int kPackPriority = 2;
constexpr int kRepositoryPriority = 1;

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

// Read-only view of the repository's own object database. Why not open the repository's
// loose and pack backends directly: on every miss libgit2 rescans the pack directory and, before
// each write, touches the loose file it looks for — about eight system calls for every new
// object, which for a first mirror cost more than compressing the objects. Lookups through this
// view never rescan (nothing else writes the clone during the scope) and the write check
// becomes one existence test.
struct RepositoryView {
  git_odb_backend base;  // first: libgit2 passes &base around
  git_odb* odb;          // a reference of its own, released in Free

  static git_odb* Of(git_odb_backend* backend) {
    return reinterpret_cast<RepositoryView*>(backend)->odb;
  }

  static int Read(void** data, size_t* len, git_object_t* type, git_odb_backend* backend,
                  const git_oid* id) {
    if (git_odb_exists_ext(Of(backend), id, GIT_ODB_LOOKUP_NO_REFRESH) != 1) return GIT_ENOTFOUND;
    git_odb_object* raw = nullptr;
    int rc = git_odb_read(&raw, Of(backend), id);
    if (rc < 0) return rc;
    GitPtr<git_odb_object> object(raw);
    const size_t size = git_odb_object_size(raw);
    *data = git_odb_backend_data_alloc(backend, size + 1);
    if (*data == nullptr) return -1;
    std::memcpy(*data, git_odb_object_data(raw), size);
    static_cast<char*>(*data)[size] = '\0';
    *len = size;
    *type = git_odb_object_type(raw);
    return 0;
  }

  static int ReadHeader(size_t* len, git_object_t* type, git_odb_backend* backend,
                        const git_oid* id) {
    if (git_odb_exists_ext(Of(backend), id, GIT_ODB_LOOKUP_NO_REFRESH) != 1) return GIT_ENOTFOUND;
    return git_odb_read_header(len, type, Of(backend), id);
  }

  static int Exists(git_odb_backend* backend, const git_oid* id) {
    return git_odb_exists_ext(Of(backend), id, GIT_ODB_LOOKUP_NO_REFRESH) == 1 ? 1 : 0;
  }

  static int Foreach(git_odb_backend* backend, git_odb_foreach_cb cb, void* payload) {
    return git_odb_foreach(Of(backend), cb, payload);
  }

  static void Free(git_odb_backend* backend) {
    auto* view = reinterpret_cast<RepositoryView*>(backend);
    git_odb_free(view->odb);
    delete view;
  }
};

// Adds a backend to `odb`; on failure the backend is freed.
absl::Status AddBackend(git_odb* odb, git_odb_backend* backend, int priority) {
  int rc = git_odb_add_backend(odb, backend, priority);
  if (rc < 0) backend->free(backend);
  return GitStatus(rc, "assembling the bulk write object database");
}

}  // namespace

BulkWriter::BulkWriter(std::unique_ptr<PackWriter> pack, GitPtr<git_repository> handle)
    : pack_(std::move(pack)), handle_(std::move(handle)) {}

BulkWriter::~BulkWriter() { handle_.reset(); }

absl::StatusOr<std::unique_ptr<BulkWriter>> BulkWriter::Begin(git_repository* repo) {
  const std::string path = git_repository_path(repo);
  ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> pack,
                   PackWriter::Create(absl::StrCat(path, "objects/pack")));

  git_odb* raw_odb = nullptr;
  RETURN_IF_ERROR(GitStatus(git_odb_new(&raw_odb), "creating an object database"));
  GitPtr<git_odb> odb(raw_odb);

  auto* packed = new PackBackend{};
  auto* view = new RepositoryView{};
  if (git_odb_init_backend(&packed->base, GIT_ODB_BACKEND_VERSION) < 0 ||
      git_odb_init_backend(&view->base, GIT_ODB_BACKEND_VERSION) < 0) {
    delete packed;
    delete view;
    return GitStatus(-1, "initialising the bulk write backends");
  }
  packed->pack = pack.get();
  packed->base.read = &PackBackend::Read;
  packed->base.read_header = &PackBackend::ReadHeader;
  packed->base.write = &PackBackend::Write;
  packed->base.exists = &PackBackend::Exists;
  packed->base.freshen = &PackBackend::Freshen;
  packed->base.foreach = &PackBackend::Foreach;
  packed->base.free = &PackBackend::Free;
  if (int rc = git_repository_odb(&view->odb, repo); rc < 0) {
    delete view;
    packed->base.free(&packed->base);
    return GitStatus(rc, "opening the object database");
  }
  view->base.read = &RepositoryView::Read;
  view->base.read_header = &RepositoryView::ReadHeader;
  view->base.exists = &RepositoryView::Exists;
  view->base.foreach = &RepositoryView::Foreach;
  view->base.free = &RepositoryView::Free;
  if (auto s = AddBackend(odb.get(), &view->base, kRepositoryPriority); !s.ok()) {
    packed->base.free(&packed->base);
    return s;
  }
  RETURN_IF_ERROR(AddBackend(odb.get(), &packed->base, kPackPriority));

  git_repository* raw = nullptr;
  RETURN_IF_ERROR(GitStatus(git_repository_wrap_odb(&raw, odb.get()),
                            absl::StrCat("opening ", path, " for a bulk write")));
  return std::unique_ptr<BulkWriter>(new BulkWriter(std::move(pack), GitPtr<git_repository>(raw)));
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
