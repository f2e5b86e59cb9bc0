/*
 * dlist: an intrusive doubly-linked list whose nodes have prev and next
 * pointers and whose head is a pointer to the first node (NULL: empty).
 * Macros, so any struct with those two fields can be a node; the caller
 * holds whatever lock protects the list.
 */
#ifndef SHARDFS_UTIL_DLIST_H
#define SHARDFS_UTIL_DLIST_H

#include <stddef.h>

/* Puts node first in the list whose head is the lvalue head. */
#define DLIST_PUSH(head, node)                                                 \
	do {                                                                   \
		(node)->prev = NULL;                                           \
		(node)->next = (head);                                         \
		if ((node)->next != NULL)                                      \
			(node)->next->prev = (node);                           \
		(head) = (node);                                               \
	} while (0)

/* Takes node out of the list whose head is the lvalue head; node's own
 * pointers are left as they were. */
#define DLIST_UNLINK(head, node)                                               \
	do {                                                                   \
		if ((node)->prev != NULL)                                      \
			(node)->prev->next = (node)->next;                     \
		else                                                           \
			(head) = (node)->next;                                 \
		if ((node)->next != NULL)                                      \
			(node)->next->prev = (node)->prev;                     \
	} while (0)

#endif
