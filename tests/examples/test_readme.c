/* ctest: labels=multiproc,san_address timeout=180 */
/* test_readme.c - every sample output in README.md is what the real
 * program prints (issue 20, acceptance 4), so the README cannot drift: when
 * a report's wording or a line number changes, this test says which block
 * to paste again.
 *
 * Samples. In README.md an indented code block, or a fenced one without an
 * info string (a bare ```), is a sample of output; fenced blocks with an
 * info string (```sh, ```c, ```text) are commands, code or prose and are not
 * checked, so a block of something other than output gets one. The last non-blank line before a sample must be its marker:
 *
 *     <!-- sample: COMMAND -->
 *     <!-- sample: COMMAND (after JOB) -->
 *
 * COMMAND is run as written by /bin/sh in a fresh directory that holds
 * build/bin (a link to the built programs, which are also first on PATH, so
 * `distrun` and `build/bin/example_bugs` both resolve), stdout and stderr
 * merged as a terminal shows them. With "(after JOB)", JOB runs first in
 * that directory and COMMAND reads what it left (trace.db). Each distinct
 * command or JOB runs once: a sample of a command that is also another
 * sample's JOB is that same run. Only distrun, distview and build/bin/
 * programs, after optional VAR=value words, may be run. A marker with no
 * sample after it, or a sample with no marker, fails; so does a command
 * whose sample is not what it prints (see Matching). A README whose text
 * changes when a program's does is fixed by pasting the new output, with
 * the placeholders put back.
 *
 * Matching. A sample's first line "$ COMMAND  # comment" is the command as
 * typed: it must be the marker's COMMAND and is not matched. The other
 * lines must appear in the output as consecutive lines; a line "..." skips
 * any number of lines (the parts around it appear in this order). Trailing
 * spaces are ignored. Placeholders stand for what varies between runs:
 *
 *     <pid> <tid> <n> <port>   digits
 *     <host> <job>             a name: letters, digits, '.', '_', '-'
 *     <dur>                    a duration: a number and its unit, "3.9 s"
 *     <path>                   a path (no spaces)
 *     <...>                    any text, or none (a list whose order varies)
 *
 * A run of spaces right after a placeholder matches any run of spaces, so
 * a table column stays aligned in the README whatever the value's width. */
#include <criterion/criterion.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"
#include "tmpdir.h"

#define MAX_SAMPLES 32
#define MAX_LINES 64
#define MAX_JOBS 16

typedef struct sample {
  int line;                 /* README line of the marker */
  char cmd[512], job[512];  /* job: "" when the command runs alone */
  int n;
  char *lines[MAX_LINES];   /* the block, indentation removed */
} sample;

typedef struct readme {
  char *text;
  int n;
  sample s[MAX_SAMPLES];
  char err[4096];           /* what is wrong with the markers, "" when fine */
} readme;

/* --- reading README.md ------------------------------------------------- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert(f, "cannot read %s", path);
  static char buf[1 << 18];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  cr_assert(len < sizeof buf - 1, "%s is larger than the test's buffer", path);
  buf[len] = '\0';
  return buf;
}

static bool blank(const char *l) {
  while (*l == ' ')
    l++;
  return *l == '\0';
}

static int indent_of(const char *l) {
  int i = 0;
  while (l[i] == ' ')
    i++;
  return i;
}

static void rstrip(char *l) {
  size_t n = strlen(l);
  while (n && (l[n - 1] == ' ' || l[n - 1] == '\r'))
    l[--n] = '\0';
}

static void complain(readme *r, const char *fmt, int line, const char *what) {
  size_t off = strlen(r->err);
  snprintf(r->err + off, sizeof r->err - off, fmt, line, what);
}

/* "COMMAND" or "COMMAND (after JOB)" from a marker line; false if none. */
static bool parse_marker(const char *l, sample *s) {
  const char *open = "<!-- sample: ", *p = strstr(l, open);
  if (!p)
    return false;
  p += strlen(open);
  const char *end = strstr(p, " -->");
  if (!end)
    return false;
  char body[1024];
  snprintf(body, sizeof body, "%.*s", (int)(end - p), p);
  char *after = strstr(body, " (after ");
  s->job[0] = '\0';
  if (after && body[strlen(body) - 1] == ')') {
    body[strlen(body) - 1] = '\0';
    snprintf(s->job, sizeof s->job, "%s", after + strlen(" (after "));
    *after = '\0';
  }
  snprintf(s->cmd, sizeof s->cmd, "%s", body);
  return true;
}

/* Cuts text into lines in place; their count. */
static int split_lines(char *text, char **lines, int max) {
  int n = 0;
  for (char *p = text; p && *p && n < max;) {
    lines[n++] = p;
    char *e = strchr(p, '\n');
    if (e)
      *e++ = '\0';
    p = e;
  }
  return n;
}

/* The line after the block that starts at start: the closing fence of a
 * fenced block, the first line indented less than ind (blank lines at the
 * end left out) of an indented one. */
static int block_end(char **lines, int nl, int start, bool fenced, int ind) {
  int end = start;
  if (fenced) {
    while (end < nl && strncmp(lines[end], "```", 3))
      end++;
    return end;
  }
  while (end < nl && (blank(lines[end]) || indent_of(lines[end]) >= ind))
    end++;
  while (end > start && blank(lines[end - 1]))
    end--;
  return end;
}

/* Splits README.md into lines and collects the samples and their markers. */
static void read_readme(readme *r) {
  const char *src = getenv("DIST_TEST_SRC");
  cr_assert(src, "DIST_TEST_SRC is not set (run through ctest)");
  char path[1024];
  snprintf(path, sizeof path, "%s/README.md", src);
  r->text = slurp(path);
  static char *lines[4096];
  int nl = split_lines(r->text, lines, 4096);
  int pending = 0; /* line of a marker not yet followed by its sample */
  sample cur;
  for (int i = 0; i < nl; i++) {
    char *l = lines[i];
    bool fenced = !strncmp(l, "```", 3);
    bool indented = !fenced && indent_of(l) >= 4 && !blank(l) && i > 0 && blank(lines[i - 1]);
    if (parse_marker(l, &cur)) {
      if (pending)
        complain(r, "README.md:%d: marker has no sample after it%s\n", pending, "");
      pending = i + 1;
      continue;
    }
    if (!fenced && !indented) {
      if (!blank(l) && pending) {
        complain(r, "README.md:%d: marker has no sample after it%s\n", pending, "");
        pending = 0;
      }
      continue;
    }
    int start = fenced ? i + 1 : i, ind = fenced ? 0 : indent_of(l);
    int end = block_end(lines, nl, start, fenced, ind);
    if (fenced && l[3] != '\0') { /* ```sh, ```c, ```text: not a sample */
      if (pending)
        complain(r, "README.md:%d: marker before a fenced block with an info string%s\n",
                 pending, "");
      pending = 0;
      i = end;
      continue;
    }
    if (!pending) {
      complain(r, "README.md:%d: a sample without a marker ('%s')\n", i + 1,
               lines[start] + (fenced ? 0 : ind));
    } else if (r->n == MAX_SAMPLES || end - start > MAX_LINES) {
      complain(r, "README.md:%d: too many samples or lines for the test%s\n", i + 1, "");
    } else {
      sample *s = &r->s[r->n++];
      *s = cur;
      s->line = pending;
      s->n = 0;
      for (int k = start; k < end; k++) {
        char *t = lines[k];
        t += (int)strlen(t) >= ind ? ind : (int)strlen(t);
        rstrip(t);
        s->lines[s->n++] = t;
      }
    }
    pending = 0;
    i = fenced ? end : end - 1;
  }
  if (pending)
    complain(r, "README.md:%d: marker has no sample after it%s\n", pending, "");
}

/* --- matching ----------------------------------------------------------- */

static bool name_char(char c) {
  return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

/* How many characters of t the placeholder ph takes (0: no match). */
static size_t take(const char *ph, size_t phlen, const char *t) {
  size_t k = 0;
  if (!strncmp(ph, "<pid>", phlen) || !strncmp(ph, "<tid>", phlen) || !strncmp(ph, "<n>", phlen) ||
      !strncmp(ph, "<port>", phlen)) {
    while (isdigit((unsigned char)t[k]))
      k++;
  } else if (!strncmp(ph, "<host>", phlen) || !strncmp(ph, "<job>", phlen)) {
    while (name_char(t[k]))
      k++;
  } else if (!strncmp(ph, "<path>", phlen)) {
    while (t[k] && t[k] != ' ')
      k++;
  } else if (!strncmp(ph, "<dur>", phlen)) {
    while (isdigit((unsigned char)t[k]) || t[k] == '.')
      k++;
    if (!k)
      return 0;
    size_t u = k + (t[k] == ' ');
    size_t v = u;
    while (isalpha((unsigned char)t[v]) || (unsigned char)t[v] >= 0x80) // "µs"
      v++;
    if (v > u)
      k = v;
  }
  return k;
}

static const char *const holders[] = {"<pid>", "<tid>", "<n>",   "<port>", "<host>",
                                      "<job>", "<path>", "<dur>", "<...>"};

/* The placeholder p starts with, and its length; 0 when none. */
static size_t holder_at(const char *p) {
  for (size_t i = 0; i < sizeof holders / sizeof holders[0]; i++)
    if (!strncmp(p, holders[i], strlen(holders[i])))
      return strlen(holders[i]);
  return 0;
}

static bool line_matches(const char *pat, const char *txt) {
  while (*pat) {
    size_t h = holder_at(pat);
    if (h && !strncmp(pat, "<...>", h)) { /* any text: try every length */
      for (const char *t = txt;; t++) {
        if (line_matches(pat + h, t))
          return true;
        if (!*t)
          return false;
      }
    }
    if (h) {
      size_t k = take(pat, h, txt);
      if (!k)
        return false;
      pat += h;
      txt += k;
      if (*pat == ' ') { /* alignment after a variable value */
        while (*pat == ' ')
          pat++;
        if (*txt != ' ')
          return false;
        while (*txt == ' ')
          txt++;
      }
      continue;
    }
    if (*pat++ != *txt++)
      return false;
  }
  while (*txt == ' ')
    txt++;
  return *txt == '\0';
}

/* Lines of pattern from..to match consecutive output lines from at. */
static bool segment_at(char *const *pat, int from, int to, char *const *out, int nout, int at) {
  if (at + (to - from) > nout)
    return false;
  for (int k = from; k < to; k++)
    if (!line_matches(pat[k], out[at + k - from]))
      return false;
  return true;
}

/* How many lines of pattern from..to match from output line at. */
static int matched_run(char *const *pat, int from, int to, char *const *out, int nout, int at) {
  int k = from;
  while (k < to && at + k - from < nout && line_matches(pat[k], out[at + k - from]))
    k++;
  return k - from;
}

/* True when the sample (from its line first) matches the output; else
 * *bad is the pattern line that differs where its part came closest, and
 * near the output line it was compared with ("" if none). */
static bool sample_matches(const sample *s, int first, const char *output, int *bad,
                           const char **near) {
  static char copy[DIST_PROC_CAP + 1], *out[8192];
  snprintf(copy, sizeof copy, "%s", output);
  int nout = 0;
  for (char *p = copy; p && *p && nout < 8192;) {
    out[nout++] = p;
    char *e = strchr(p, '\n');
    if (e)
      *e++ = '\0';
    rstrip(out[nout - 1]);
    p = e;
  }
  int at = 0;
  for (int k = first; k < s->n;) {
    if (!strcmp(s->lines[k], "...")) {
      k++;
      continue;
    }
    int end = k;
    while (end < s->n && strcmp(s->lines[end], "..."))
      end++;
    bool anchored = k > first && strcmp(s->lines[k - 1], "...");
    int found = -1;
    for (int a = at; a < nout && found < 0; a++) {
      if (segment_at(s->lines, k, end, out, nout, a))
        found = a;
      if (anchored)
        break;
    }
    if (found < 0) {
      int best = 0, best_at = -1;
      for (int a = at; a < nout; a++) {
        int run = matched_run(s->lines, k, end, out, nout, a);
        if (run > best || best_at < 0) {
          best = run;
          best_at = a;
        }
        if (anchored)
          break;
      }
      *bad = k + best;
      *near = best_at >= 0 && best_at + best < nout ? out[best_at + best] : "";
      return false;
    }
    at = found + (end - k);
    k = end;
  }
  return true;
}

/* --- running ------------------------------------------------------------ */

typedef struct job_dir {
  char job[512];
  char dir[64];
  char *out; /* what it printed */
} job_dir;

static job_dir jobs[MAX_JOBS];
static int njobs;

/* Only the project's programs, after VAR=value words. */
static bool allowed(const char *cmd) {
  const char *p = cmd;
  for (;;) {
    const char *sp = strchr(p, ' ');
    const char *eq = strchr(p, '=');
    if (!sp || !eq || eq > sp)
      break;
    p = sp + 1;
  }
  return !strncmp(p, "distrun ", 8) || !strncmp(p, "distview ", 9) ||
         !strncmp(p, "build/bin/", 10);
}

/* Runs cmd in dir; its stdout and stderr, merged, in out. */
static void run_in(const char *dir, const char *cmd, dist_proc *p) {
  cr_assert(allowed(cmd), "README sample command '%s' runs something other than distrun, "
            "distview or build/bin/", cmd);
  char script[2048];
  snprintf(script, sizeof script, "cd %s && { %s ; } 2>&1", dir, cmd);
  dist_proc_runl(p, NULL, 120000, "/bin/sh", "-c", script, (char *)NULL);
  cr_log_info("$ %s   (in %s, status %d)\n%s", cmd, dir, p->status, DIST_PROC_OUT(p));
  cr_assert(!p->killed, "'%s' did not end within 120 s:\n%s", cmd, DIST_PROC_OUT(p));
}

static const char *fresh_dir(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/dist-readme-XXXXXX");
  cr_assert(dist_test_mkdtemp(dir), "mkdtemp");
  char link[128];
  snprintf(link, sizeof link, "%s/build", dir);
  cr_assert(mkdir(link, 0700) == 0, "mkdir %s", link);
  snprintf(link, sizeof link, "%s/build/bin", dir);
  char bin[1024];
  cr_assert(realpath(dist_test_bin("distrun"), bin), "no %s", dist_test_bin("distrun"));
  *strrchr(bin, '/') = '\0';
  cr_assert(symlink(bin, link) == 0, "symlink %s", link);
  return dir;
}

/* Where job ran and what it printed (running it the first time). */
static const job_dir *job_ran(const char *job) {
  for (int i = 0; i < njobs; i++)
    if (!strcmp(jobs[i].job, job))
      return &jobs[i];
  cr_assert(njobs < MAX_JOBS, "too many jobs");
  job_dir *j = &jobs[njobs++];
  snprintf(j->job, sizeof j->job, "%s", job);
  snprintf(j->dir, sizeof j->dir, "%s", fresh_dir());
  static dist_proc p;
  run_in(j->dir, job, &p);
  j->out = strdup(DIST_PROC_OUT(&p));
  cr_assert(j->out);
  return j;
}

/* The sample's "$ " line, if any, must be its command (a "# comment" after
 * two spaces aside). Returns the first line to match. */
static int check_dollar_line(const sample *s) {
  if (!s->n || strncmp(s->lines[0], "$ ", 2))
    return 0;
  char typed[512];
  snprintf(typed, sizeof typed, "%s", s->lines[0] + 2);
  char *hash = strstr(typed, "  #");
  if (hash)
    *hash = '\0';
  rstrip(typed);
  cr_expect_str_eq(typed, s->cmd, "README.md:%d: the sample shows '$ %s' but its marker runs '%s'",
                   s->line, typed, s->cmd);
  return 1;
}

static void setup_env(void) {
  dist_test_clean_launch_env();
  unsetenv("DIST_TRACE");
  unsetenv("DIST_LOG_LEVEL");
  unsetenv("TORCH_CPP_LOG_LEVEL");
  unsetenv("DIST_TIMEOUT");
  unsetenv("DIST_TRANSPORT");
  char bin[1024], path[4096];
  cr_assert(realpath(dist_test_bin("distrun"), bin), "no %s", dist_test_bin("distrun"));
  *strrchr(bin, '/') = '\0';
  const char *old = getenv("PATH");
  snprintf(path, sizeof path, "%s:%s", bin, old ? old : "/usr/bin:/bin");
  setenv("PATH", path, 1);
}

Test(examples_readme, every_output_block_has_a_marker_naming_its_command, .timeout = 10) {
  static readme r;
  read_readme(&r);
  cr_assert_str_empty(r.err, "%s", r.err);
  cr_assert_gt(r.n, 0, "no samples found in README.md");
  for (int i = 0; i < r.n; i++)
    cr_expect(r.s[i].n > 0, "README.md:%d: empty sample", r.s[i].line);
}

Test(examples_readme, every_sample_is_what_its_command_prints_now, .timeout = 170) {
  static readme r;
  read_readme(&r);
  cr_assert_str_empty(r.err, "%s", r.err);
  setup_env();
  static dist_proc p;
  int failed = 0;
  for (int i = 0; i < r.n; i++) {
    sample *s = &r.s[i];
    const char *out;
    if (s->job[0]) { /* the command reads what the job left */
      run_in(job_ran(s->job)->dir, s->cmd, &p);
      out = DIST_PROC_OUT(&p);
    } else {
      out = job_ran(s->cmd)->out;
    }
    int bad = 0, first = check_dollar_line(s);
    const char *near = "";
    if (!sample_matches(s, first, out, &bad, &near)) {
      failed++;
      cr_expect(false,
                "README.md:%d: the sample of '%s' is not what it prints now (placeholders and "
                "'...': see test_readme.c).\n  README: %s\n  output: %s\nThe whole output:\n%s",
                s->line, s->cmd, s->lines[bad], near, out);
    }
  }
  for (int i = 0; i < njobs; i++) {
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf %s", jobs[i].dir);
    cr_expect_eq(system(rm), 0);
    free(jobs[i].out);
  }
  cr_log_info("%d README samples checked, %d differ\n", r.n, failed);
}
