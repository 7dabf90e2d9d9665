/* top.c - see top.h. */
#include "top.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "view.h"

/* Time between fetches (nanoseconds) and the longest wait for a key
 * (milliseconds) before the clock is looked at again. */
#define TOP_PERIOD_NS NS_PER_SEC
#define TOP_KEY_WAIT_MS 100

#define KEY_CTRL_C 3

/* Columns the numbers take in a row with rates (the table's width minus
 * the name column). */
#define TOP_NUMBERS_W 84

typedef struct Top {
    Session *s;
    Snapshot cur, prev;
    int have_prev;
    ViewCol sort;
    int reverse;
} Top;

static const char *const sort_names[VIEW_COL_COUNT] = {
    "tube",   "ready",   "urgent",   "reserved", "delayed",
    "buried", "waiting", "watching", "puts/s",   "deletes/s",
};

static void
draw_table(const Top *t, int row)
{
    char line[TUBE_NAME_MAX + 128];
    int w = view_name_width(&t->cur), room = COLS - TOP_NUMBERS_W;
    if (w > room) w = room > 4 ? room : 4;
    view_header(line, sizeof line, w, 1);
    attron(A_REVERSE);
    mvprintw(row++, 0, "%-*.*s", COLS, COLS, line);
    attroff(A_REVERSE);
    for (size_t i = 0; i < t->cur.ntubes && row < LINES; i++, row++) {
        if (row == LINES - 1 && i + 1 < t->cur.ntubes) {
            mvprintw(row, 0, "... %zu more tubes", t->cur.ntubes - i);
            break;
        }
        view_row(&t->cur.tubes[i], line, sizeof line, w, 1);
        mvprintw(row, 0, "%.*s", COLS, line);
    }
}

static void
draw(const Top *t)
{
    char sum[4][VIEW_LINE];
    int n = view_summary(&t->cur, sum, 4), row = 0;
    erase();
    mvprintw(row++, 0, "%.*s", COLS,
             "rockstalk top  (q quit, < > or 1-9 0 sort, r reverse)");
    mvprintw(row++, 0, "%.*s  sort: %s%s", COLS, t->s->conn.where,
             sort_names[t->sort], t->reverse ? " (reversed)" : "");
    for (int i = 0; i < n; i++)
        mvprintw(row++, 0, "%.*s", COLS, sum[i]);
    draw_table(t, row + 1);
    refresh();
}

/* Fetches a snapshot, with rates from the last one. */
static int
fetch(Top *t, char *err, size_t errcap)
{
    Snapshot next;
    if (view_fetch(t->s, &next, err, errcap) < 0) {
        view_free(&next);
        return -1;
    }
    if (t->have_prev) view_free(&t->prev);
    t->prev = t->cur;
    t->have_prev = t->cur.at_ns != 0;
    t->cur = next;
    if (t->have_prev) view_rates(&t->cur, &t->prev);
    view_sort(&t->cur, t->sort, t->reverse);
    return 0;
}

/* Applies a key; returns 1 to quit. */
static int
key(Top *t, int ch)
{
    if (ch == 'q' || ch == 'Q' || ch == KEY_CTRL_C) return 1;
    if ((ch == '<' || ch == KEY_LEFT) && t->sort > 0) t->sort--;
    if ((ch == '>' || ch == KEY_RIGHT) && t->sort + 1 < VIEW_COL_COUNT)
        t->sort++;
    if (ch >= '1' && ch <= '9') t->sort = (ViewCol)(ch - '1');
    if (ch == '0') t->sort = VIEW_COL_DELETES;
    if (ch == 'r' || ch == 'R') t->reverse = !t->reverse;
    view_sort(&t->cur, t->sort, t->reverse);
    return 0;
}

static int
loop(Top *t, char *err, size_t errcap)
{
    int64_t next = 0;
    for (;;) {
        if (mono_ns() >= next) {
            if (fetch(t, err, errcap) < 0) return -1;
            next = mono_ns() + TOP_PERIOD_NS;
            draw(t);
        }
        int ch = getch();
        if (ch == ERR) continue;
        if (key(t, ch)) return 0;
        draw(t);
    }
}

int
top_run(Session *s, char *err, size_t errcap)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        snprintf(err, errcap, "top needs a terminal (try: rockstalk tubes)");
        return -1;
    }
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        snprintf(err, errcap, "cannot set up the terminal (TERM=%s)",
                 getenv("TERM") ? getenv("TERM") : "");
        return -1;
    }
    raw();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    timeout(TOP_KEY_WAIT_MS);
    Top t = {.s = s, .sort = VIEW_COL_NAME};
    int rc = loop(&t, err, errcap);
    endwin();
    delscreen(scr);
    view_free(&t.cur);
    if (t.have_prev) view_free(&t.prev);
    return rc;
}
