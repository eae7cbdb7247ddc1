// One number printed with a printf format, for the verdicts' texts.
#pragma once

#include <cstdio>
#include <string>

namespace rankscope::acceptance {

inline std::string printed(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

}  // namespace rankscope::acceptance
