// Package lrux holds what the caches built on golang-lru share.
package lrux

import lru "github.com/hashicorp/golang-lru/v2"

// GetOrAdd is key's entry in c, made by mk when there is none; of two
// callers adding one at once, both get the one kept.
func GetOrAdd[K comparable, V any](c *lru.Cache[K, V], key K, mk func() V) V {
	if v, ok := c.Get(key); ok {
		return v
	}
	v := mk()
	if prev, loaded, _ := c.PeekOrAdd(key, v); loaded {
		return prev
	}
	return v
}

// New is a cache of size entries; size must be at least 1.
func New[K comparable, V any](size int) *lru.Cache[K, V] {
	c, err := lru.New[K, V](size)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}
