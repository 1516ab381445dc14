#!/bin/bash
# check-messages-doc.sh - docs/messages.md must describe every WARN and comm error that
# the plugin can print.
#
# For every MCP_WARN(...) and mcp_comm_fail(...) call in src/ and plugin/, take the
# format string (adjacent literals joined, comments ignored), drop its conversions
# (%s, %d, %#x, ...) and keep the leading constant text: up to six words, starting at
# the first word (leading placeholders such as "%s %s: " are skipped). The document
# must contain those pieces in order, inside one code span, with anything (the
# placeholder the document uses: ADDR, N, DEV, ...) between them. A format with no
# constant words at all ("%s") passes on text built elsewhere; then the document must
# name the source file that prints it (e.g. src/core/mcp_param.c).
#
# The other direction keeps messages from being lost: every entry of the document (a list
# item that starts with a code span, nested ones included) must still be printed. The
# entry's constant text is cut into runs of words at its placeholders (capitals such as
# PEER, 0xKEY) and at optional parts ([...]); at least one run of two or more words must
# appear in the string literals of src/ and plugin/ (adjacent literals joined). Removing
# a message from the code therefore means removing its entry on purpose. Entries made of
# placeholders only ("DIR PEER: REASON") cannot be looked for and are counted.
#
# Usage: check-messages-doc.sh [SOURCE_ROOT [DOC]]
#   SOURCE_ROOT defaults to the repository this script lives in, DOC to
#   SOURCE_ROOT/docs/messages.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${1:-$(dirname "$here")}
doc=${2:-$root/docs/messages.md}

command -v perl >/dev/null || { echo "check-messages-doc: perl is needed"; exit 1; }
[ -r "$doc" ] || { echo "check-messages-doc: $doc is missing"; exit 1; }

files=()
for dir in src plugin; do
  [ -d "$root/$dir" ] || continue
  while IFS= read -r -d '' f; do files+=("$f"); done \
    < <(find "$root/$dir" -name '*.c' -print0 | sort -z)
done
[ ${#files[@]} -gt 0 ] || { echo "check-messages-doc: no C files under $root/src or $root/plugin"; exit 1; }

exec perl -e '
use strict;
use warnings;

my ($root, $doc, @files) = @ARGV;
my $MAXWORDS = 6;

open(my $dh, "<", $doc) or die "cannot read $doc: $!\n";
my $text = do { local $/; <$dh> };
close($dh);
$text =~ s/\s+/ /g;

# printf conversions; "%%" is a literal percent sign.
my $conv = qr/%(?:%|[-+ #0\x27]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGaAcspn])/;

sub unescape {
  my ($s) = @_;
  $s =~ s/\\([\\"\x27?])/$1/g;
  $s =~ s/\\[ntr]/ /g;
  return $s;
}

# The constant pieces of a format, in order (conversions removed).
sub pieces {
  my ($fmt) = @_;
  my @p = ("");
  while ($fmt =~ /\G(.*?)($conv|$)/gs) {
    my ($lit, $c) = ($1, $2);
    $p[-1] .= $lit;
    last if $c eq "";
    if ($c eq "%%") { $p[-1] .= "%"; } else { push @p, ""; }
  }
  return @p;
}

# Leading constant text: from the first word, at most $MAXWORDS words.
sub fragment {
  my @pieces = pieces($_[0]);
  my (@out, $words);
  $words = 0;
  for my $p (@pieces) {
    $p =~ s/\s+/ /g;
    if (!@out) {
      next unless $p =~ /[A-Za-z0-9]/;
      $p =~ s/^[^A-Za-z0-9_(\x27"]+//;   # ": ", ". ", "; " after a leading placeholder
    }
    my @tok = grep { length } split / /, $p;
    my @take;
    for my $t (@tok) {
      last if $words >= $MAXWORDS;
      push @take, $t;
      $words++ if $t =~ /[A-Za-z0-9]/;
    }
    push @out, join(" ", @take) if @take;
    last if $words >= $MAXWORDS;
  }
  return @out;
}

my ($checked, @missing) = (0);
my $literals = "";    # every string literal of the sources, conversions marked by \x01
for my $file (@files) {
  open(my $fh, "<", $file) or die "cannot read $file: $!\n";
  my $src = do { local $/; <$fh> };
  close($fh);
  (my $rel = $file) =~ s{^\Q$root\E/*}{};
  # Comments out (newlines kept for line numbers), string and char literals kept.
  $src =~ s{("(?:[^"\\\n]|\\.)*")|(\x27(?:[^\x27\\\n]|\\.)*\x27)|(/\*.*?\*/)|(//[^\n]*)}{
    defined $1 ? $1 : defined $2 ? $2 : do { (my $c = defined $3 ? $3 : $4) =~ s/[^\n]/ /g; $c }
  }gse;
  (my $joined = $src) =~ s/"\s*"//g;
  while ($joined =~ /"((?:[^"\\\n]|\\.)*)"/g) {
    (my $l = unescape($1)) =~ s/$conv/\x01/g;
    $literals .= "\x02$l";
  }
  while ($src =~ /\b(MCP_WARN_LIMITED|MCP_WARN|mcp_comm_fail)\s*\(/g) {
    my ($name, $start, $open) = ($1, $-[0], $+[0]);
    my $line = 1 + (substr($src, 0, $start) =~ tr/\n//);
    my $before = substr($src, 0, $start);
    next if $before =~ /(?:^|\n)\s*#\s*define\s+$/;          # the macro itself
    next if $before =~ /\b(?:void|int|static)\s+$/;           # the definition or a prototype
    # The argument list: up to the matching parenthesis, skipping literals.
    my ($depth, $i, $n) = (1, $open, length $src);
    while ($i < $n && $depth > 0) {
      my $ch = substr($src, $i, 1);
      if ($ch eq "\"" || $ch eq "\x27") {
        my $q = $ch;
        $i++;
        while ($i < $n && substr($src, $i, 1) ne $q) { $i += substr($src, $i, 1) eq "\\" ? 2 : 1; }
      } elsif ($ch eq "(") {
        $depth++;
      } elsif ($ch eq ")") {
        $depth--;
      }
      $i++;
    }
    my $args = substr($src, $open, $i - $open - 1);
    pos($src) = $open;
    if ($args !~ /"((?:[^"\\]|\\.)*)"/g) {
      push @missing, "$rel:$line: $name(...) has no literal format string";
      next;
    }
    my $fmt = unescape($1);
    while ($args =~ /\G\s*"((?:[^"\\]|\\.)*)"/gc) { $fmt .= unescape($1); }
    $checked++;
    my @frag = fragment($fmt);
    if (!@frag) {
      push @missing, "$rel:$line: $name(\"$fmt\") prints text built elsewhere; name $rel in the document"
        unless index($text, $rel) >= 0;
      next;
    }
    my $re = join("[^`]*", map { quotemeta } @frag);
    push @missing, "$rel:$line: $name: \"" . join(" ... ", @frag) . "\" (format \"$fmt\")"
      unless $text =~ /$re/;
  }
}

$literals =~ s/\s+/ /g;

# The other direction: each entry of the document is still printed somewhere.
my ($entries, $unchecked, @stale) = (0, 0);
my @doclines = split /\n/, do { open(my $d, "<", $doc) or die; local $/; <$d> };
for my $i (0 .. $#doclines) {
  next unless $doclines[$i] =~ /^\s*- `([^`]+)`/;
  (my $m = $1) =~ s/[\[\]]/ | /g;
  my (@runs, @cur);
  for my $t (split(/\s+/, $m), "|") {
    if ($t =~ /[a-z]{2}/ && $t !~ /(?:^|[^A-Za-z])(?:0x)?[A-Z][A-Z_]*(?:[^A-Za-z]|$)/) {
      push @cur, $t;
      next;
    }
    push @runs, join(" ", @cur) if @cur >= 2;
    @cur = ();
  }
  $entries++;
  if (!@runs) { # all placeholders ("DIR PEER: REASON"): nothing to look for
    $unchecked++;
    next;
  }
  push @stale, "line " . ($i + 1) . ": `$1` (looked for: \"" . join("\", \"", @runs) . "\")"
    unless grep { index($literals, $_) >= 0 } @runs;
}

if (@missing) {
  print "docs/messages.md lacks ", scalar(@missing), " of the $checked messages in src/ and plugin/:\n";
  print "  $_\n" for @missing;
  print "add an entry for each (the message with placeholders, level, cause, what to do)\n";
}
if (@stale) {
  print "docs/messages.md has ", scalar(@stale), " of its $entries entries that src/ and plugin/ no longer print:\n";
  print "  $_\n" for @stale;
  print "a message was lost, or its entry is stale: restore the message or remove the entry on purpose\n";
}
exit 1 if @missing || @stale;
print "docs/messages.md covers all $checked MCP_WARN/mcp_comm_fail messages in src/ and plugin/, ",
  "and all its $entries entries are still printed ($unchecked of them are placeholders only)\n";
' "$root" "$doc" "${files[@]}"
