/*
 * text.h - the one white-space trim used wherever mcpnet reads text it was given
 * (parameter values, KEY=VALUE files, the rank map, NCCL's device and interface
 * lists), so "what counts as a space" is decided in one place; and the one writer of a
 * caller's optional error buffer (the wire decoder, the doctor's rank-map suggestion).
 */
#ifndef MCPNET_TEXT_H
#define MCPNET_TEXT_H

#include <stddef.h>

/* Narrows the span [*s, *s + *n) past leading and trailing white space (isspace);
 * returns the new length. Nothing is written: the text may be read-only. */
size_t mcp_trim_span(const char **s, size_t *n);
/* In place: returns s advanced past leading white space, trailing white space cut. */
char *mcp_trim_inplace(char *s);
/* Formats into err[errlen], cut to fit; does nothing when err is NULL or errlen is 0,
 * so a caller that does not want the reason passes NULL. */
void mcp_text_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
