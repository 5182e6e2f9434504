// Tokens of TorchScript IR text. The lexer is pull-based with one token of
// lookahead; the parser can also read raw text (scopes, source comments and
// tensor literals are not token-shaped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace llga {

// A syntax error with its place in the text.
struct ParseError : std::runtime_error {
  ParseError(std::string full, std::string message, size_t line, size_t column, std::string excerpt)
      : std::runtime_error(std::move(full)),
        message(std::move(message)), line(line), column(column), excerpt(std::move(excerpt)) {}
  std::string message;  // without position
  size_t line;          // 1-based
  size_t column;        // 1-based, in bytes
  std::string excerpt;  // the offending line
};

enum class Tok : uint8_t {
  End, Ident, ValueRef, Int, Float, String,
  LParen, RParen, LBracket, RBracket, LBrace, RBrace,
  Comma, Colon, Equals, Star, Question, Less, Greater, Arrow,
};
const char* tokName(Tok t);

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  // for ValueRef without the '%'; for String with quotes
  size_t pos = 0;         // byte offset of the first character
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string filename);

  const Token& peek();
  Token next();
  bool accept(Tok k);                  // consumes if the next token is k
  Token expect(Tok k, const char* what);
  bool peekIdent(std::string_view word);

  // Raw access: `pos()` is the end of the last consumed token.
  size_t pos() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; has_peek_ = false; }
  std::string_view text() const { return text_; }
  // Skips spaces and tabs (not newlines) from pos(); returns the new position.
  size_t skipBlanks();

  [[noreturn]] void error(size_t pos, const std::string& message) const;
  // Decodes a String token ("..." with escapes).
  std::string unquote(const Token& t) const;

 private:
  Token lex();
  void skipTrivia();
  std::string_view text_;
  std::string filename_;
  size_t pos_ = 0;
  Token peeked_;
  bool has_peek_ = false;
};

}  // namespace llga
