/* tmpdir.h - temporary directories that tests do not leave behind. */
#ifndef DIST_TEST_TMPDIR_H
#define DIST_TEST_TMPDIR_H

/* mkdtemp(tmpl), and the directory, with everything in it, is removed when
 * the process that made it exits normally (a test's worker process, the
 * harness), whatever the test's outcome; forked ranks that exit do not
 * remove their parent's directory, and mounts inside are not crossed.
 * Returns tmpl, or NULL as mkdtemp does. */
char *dist_test_mkdtemp(char *tmpl);

#endif
