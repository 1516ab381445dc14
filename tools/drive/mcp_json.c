/*
 * mcp_json.c - see mcp_json.h. Escapes what JSON requires (the quote, the backslash and
 * the control characters); newlines and tabs get their short forms since error
 * messages carry them; everything else, UTF-8 included, is written as it is.
 */
#include "mcp_json.h"

void mcp_json_str(FILE *f, const char *s)
{
  fputc('"', f);
  for (; s != NULL && *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;

    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}
