/*
 * An intrusive doubly linked list, written once: a node embeds an
 * stg__link, a list is its first and last link, and STG__OWNER gets the
 * node back from its link. For the engine's retry queue, the hosts' LRU
 * order (libstagger-curl) and the proxy's client connections. Header-only,
 * internal.
 *
 * Invariants: head and tail are both NULL (empty) or both set; head->prev
 * and tail->next are NULL; a link is in at most one list, and a link in
 * none has prev and next NULL (stg__list_unlink leaves it so).
 */
#ifndef STG_UTIL_LIST_H
#define STG_UTIL_LIST_H

#include <stddef.h>

typedef struct stg__link {
    struct stg__link *prev, *next;
} stg__link;

typedef struct stg__list {
    stg__link *head, *tail;
} stg__list;

/* The node of type T whose member m is the link l (NULL stays NULL). */
#define STG__OWNER(l, T, m) ((l) ? (T *)(void *)((char *)(l) - offsetof(T, m)) : (T *)NULL)

/* Put n (in no list) after prev, or first when prev is NULL. */
static inline void stg__list_insert(stg__list *l, stg__link *prev, stg__link *n)
{
    n->prev = prev;
    n->next = prev ? prev->next : l->head;
    if (n->next)
        n->next->prev = n;
    else
        l->tail = n;
    if (prev)
        prev->next = n;
    else
        l->head = n;
}

static inline void stg__list_push_back(stg__list *l, stg__link *n)
{
    stg__list_insert(l, l->tail, n);
}

static inline void stg__list_push_front(stg__list *l, stg__link *n)
{
    stg__list_insert(l, NULL, n);
}

/* Take n out of l (n is in l). */
static inline void stg__list_unlink(stg__list *l, stg__link *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

#endif
