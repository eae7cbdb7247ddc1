// What every self-contained HTML page of rankscope must be (model/html.h):
// balanced tags, nothing referred to outside the page, unique ids, no
// not-a-number reaching the reader. For the pages' gtest tests.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace rankscope::test {

inline size_t count(const std::string& text, const std::string& needle) {
  size_t found = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++found;
  return found;
}

// Opening tags ("<g>" or "<g ...") against closing ones.
inline void expect_balanced(const std::string& html, const std::string& tag) {
  const size_t opened = count(html, "<" + tag + ">") + count(html, "<" + tag + " ");
  EXPECT_EQ(opened, count(html, "</" + tag + ">")) << "<" << tag << "> opened and closed unequally";
}

inline void expect_well_formed_and_self_contained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* tag : {"html", "head", "body", "main", "header", "section", "svg", "g", "text", "table", "thead",
                          "tbody", "tr", "td", "th", "dl", "details", "p", "title", "style", "div"}) {
    expect_balanced(html, tag);
  }
  for (const char* external : {"<script", "<link", "<img", "<iframe", "http://", "https://", "src=", "href=", "url(",
                               "@import"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << "the page refers outside itself: " << external;
  }
  // Ids are how the browser tests and readers' bookmarks find parts.
  std::set<std::string> ids;
  const std::regex id_attribute("id=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), id_attribute); it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(ids.insert((*it)[1]).second) << "duplicate id " << (*it)[1];
  }
  // Not-a-number and infinities must never reach the reader.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\b(nan|inf|NaN|Infinity)\b)")));
}

}  // namespace rankscope::test
