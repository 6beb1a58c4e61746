package main

// The C locale with a codeset (LANG=C.UTF-8, common in containers and
// minimal installs) is not a language tag: Fyne's lang package, while its
// package initialises (before any Go code of ours runs), logs "Error parsing
// user locale C" to stderr on every start, of the window and of every verb.
// A C constructor runs earlier, at program load: it settles the C library's
// character type from the environment first (so GLFW's text input keeps
// UTF-8, as it would have), then cuts the locale variable in effect for
// messages down to plain "C" in place, which Fyne reads as "no locale" and
// falls back to English silently. The Go runtime reads the same
// environment strings, so it sees "C".

/*
#include <locale.h>
#include <stdlib.h>
#include <string.h>

static void talkbox_quiet_c_locale(void) __attribute__((constructor));

static void talkbox_quiet_c_locale(void) {
	const char *names[] = {"LC_ALL", "LC_MESSAGES", "LANG"};
	for (int i = 0; i < 3; i++) {
		char *v = getenv(names[i]);
		if (v == NULL || v[0] == '\0') {
			continue;
		}
		// Only "C.<codeset>" and "POSIX.<codeset>" (with or without
		// @modifier); anything else is left as the user set it.
		size_t n = 0;
		if (strncmp(v, "C.", 2) == 0 || strncmp(v, "C@", 2) == 0) {
			n = 1;
		} else if (strncmp(v, "POSIX.", 6) == 0 || strncmp(v, "POSIX@", 6) == 0) {
			n = 5;
		}
		if (n > 0) {
			setlocale(LC_CTYPE, "");
			v[n] = '\0';
		}
		return;
	}
}
*/
import "C"
