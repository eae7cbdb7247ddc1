#include "otf2_archive.h"

#include <cstdarg>

#include "rankscope/model/error.h"

namespace rankscope::export_detail {
namespace {

// OTF2 prints every error it meets to stderr unless a callback takes it; the
// code comes back to the caller, which names it in its Error.
OTF2_ErrorCode keep_quiet(void*, const char*, uint64_t, const char*, OTF2_ErrorCode code, const char*, va_list) {
  return code;
}

// Every chunk full is written out at once, so memory holds one chunk per open location.
OTF2_FlushType always_flush(void*, OTF2_FileType, OTF2_LocationRef, void*, bool) { return OTF2_FLUSH; }

constexpr OTF2_FlushCallbacks kFlushCallbacks = {always_flush, nullptr};

}  // namespace

Otf2Archive::Otf2Archive(const std::string& directory, const std::string& name, std::string folder)
    : folder_(std::move(folder)) {
  OTF2_Error_RegisterCallback(keep_quiet, nullptr);
  archive_ = OTF2_Archive_Open(directory.c_str(), name.c_str(), OTF2_FILEMODE_WRITE, OTF2_CHUNK_SIZE_EVENTS_DEFAULT,
                               OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT, OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
  if (archive_ == nullptr) throw Error(folder_ + ": OTF2 could not create the archive in " + directory);
  check(OTF2_Archive_SetFlushCallbacks(archive_, &kFlushCallbacks, nullptr), "set its flush callbacks");
  check(OTF2_Archive_SetSerialCollectiveCallbacks(archive_), "set its collective callbacks");
  check(OTF2_Archive_SetCreator(archive_, "rankscope export"), "set the creator");
  check(OTF2_Archive_OpenEvtFiles(archive_), "open the event files");
  check(OTF2_Archive_OpenDefFiles(archive_), "open the local definition files");
}

Otf2Archive::~Otf2Archive() {
  if (archive_ != nullptr) OTF2_Archive_Close(archive_);
}

OTF2_EvtWriter* Otf2Archive::open_events(OTF2_LocationRef location) {
  OTF2_EvtWriter* writer = OTF2_Archive_GetEvtWriter(archive_, location);
  if (writer == nullptr) {
    throw Error(folder_ + ": OTF2 could not open the events of location " + std::to_string(location));
  }
  return writer;
}

void Otf2Archive::close_events(OTF2_LocationRef location, OTF2_EvtWriter* writer) {
  check(OTF2_Archive_CloseEvtWriter(archive_, writer), "write a location's events");
  OTF2_DefWriter* definitions = OTF2_Archive_GetDefWriter(archive_, location);
  if (definitions == nullptr) {
    throw Error(folder_ + ": OTF2 could not open the local definitions of location " + std::to_string(location));
  }
  check(OTF2_Archive_CloseDefWriter(archive_, definitions), "write a location's local definitions");
}

OTF2_GlobalDefWriter* Otf2Archive::global_definitions() {
  OTF2_GlobalDefWriter* writer = OTF2_Archive_GetGlobalDefWriter(archive_);
  if (writer == nullptr) throw Error(folder_ + ": OTF2 could not open the global definitions");
  return writer;
}

void Otf2Archive::set_property(const char* name, const std::string& value) {
  check(OTF2_Archive_SetProperty(archive_, name, value.c_str(), true), "set an archive property");
}

void Otf2Archive::set_property(const char* name, bool value) {
  check(OTF2_Archive_SetBoolProperty(archive_, name, value, true), "set an archive property");
}

void Otf2Archive::close() {
  check(OTF2_Archive_CloseEvtFiles(archive_), "close the event files");
  check(OTF2_Archive_CloseDefFiles(archive_), "close the local definition files");
  OTF2_Archive* archive = archive_;
  archive_ = nullptr;
  check(OTF2_Archive_Close(archive), "write the archive");
}

void Otf2Archive::check(OTF2_ErrorCode code, const char* doing) const {
  if (code == OTF2_SUCCESS) return;
  throw Error(folder_ + ": OTF2 could not " + doing + ": " + OTF2_Error_GetName(code) + " (" +
              OTF2_Error_GetDescription(code) + ")");
}

}  // namespace rankscope::export_detail
