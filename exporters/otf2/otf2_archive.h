// An OTF2 archive being written, serially, by one process: opens it, hands
// out a writer per location, and turns OTF2's error codes into Errors that
// name the output folder and OTF2's own text for the code.
#pragma once

#include <otf2/otf2.h>

#include <cstdint>
#include <string>

namespace rankscope::export_detail {

class Otf2Archive {
 public:
  // Creates `directory`/`name`.otf2, `name`.def and `name`/; `folder` is what
  // errors name (the output as the user gave it).
  Otf2Archive(const std::string& directory, const std::string& name, std::string folder);
  Otf2Archive(const Otf2Archive&) = delete;
  Otf2Archive& operator=(const Otf2Archive&) = delete;
  ~Otf2Archive();  // closes without checking: after an error, the folder is removed anyway

  OTF2_EvtWriter* open_events(OTF2_LocationRef location);
  // Flushes the location's events to its file and frees its buffer; its
  // (empty) local definitions file is written beside it, as readers expect one.
  void close_events(OTF2_LocationRef location, OTF2_EvtWriter* writer);
  OTF2_GlobalDefWriter* global_definitions();
  void set_property(const char* name, const std::string& value);
  void set_property(const char* name, bool value);
  void close();  // writes the anchor file and the global definitions

  // Throws Error unless `code` is OTF2_SUCCESS; `doing` says what failed ("write the regions").
  void check(OTF2_ErrorCode code, const char* doing) const;

 private:
  std::string folder_;
  OTF2_Archive* archive_ = nullptr;
};

}  // namespace rankscope::export_detail
