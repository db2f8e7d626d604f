package store

// Bolt's rooms and policies: their writes and reads.

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/sig"
)

// PutRoom stores a room, replacing its descriptor and key log head.
func (s *Bolt) PutRoom(ctx context.Context, r Room) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v := make([]byte, 0, 6+len(r.Descriptor)+len(r.KeyLogHead))
	v = append(v, formatVersion, 0)
	if r.KeyLogHead != nil {
		v[1] = 1
	}
	v = binary.LittleEndian.AppendUint32(v, uint32(len(r.Descriptor)))
	v = append(v, r.Descriptor...)
	v = append(v, r.KeyLogHead...)
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRooms).Put(clone(r.ID[:]), v)
	})
}

// parseRoom reads a rooms value; it copies.
func parseRoom(id, v []byte) (Room, error) {
	var r Room
	if len(id) != sig.HashSize || len(v) < 6 || v[0] != formatVersion || v[1] > 1 {
		return r, fmt.Errorf("store: a room value of %d bytes does not read", len(v))
	}
	n := binary.LittleEndian.Uint32(v[2:])
	if uint64(n) > uint64(len(v)-6) {
		return r, fmt.Errorf("store: a room's descriptor of %d bytes in %d", n, len(v)-6)
	}
	copy(r.ID[:], id)
	r.Descriptor = clone(v[6 : 6+n])
	if r.Descriptor == nil {
		r.Descriptor = []byte{}
	}
	if v[1] == 1 {
		r.KeyLogHead = append([]byte{}, v[6+n:]...)
	} else if len(v) != int(6+n) {
		return r, fmt.Errorf("store: a room with no key log head has %d bytes more", len(v)-int(6+n))
	}
	return r, nil
}

// Rooms returns every room held.
func (s *Bolt) Rooms(ctx context.Context) ([]Room, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var rs []Room
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRooms).ForEach(func(k, v []byte) error {
			r, err := parseRoom(k, v)
			if err != nil {
				return err
			}
			rs = append(rs, r)
			return nil
		})
	})
	return rs, err
}

// PutPolicy stores a policy by digest and, with active, makes it the room's
// active policy.
func (s *Bolt) PutPolicy(ctx context.Context, room sig.Hash, digest sig.Hash, raw []byte, active bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPolicies).Put(clone(digest[:]), clone(raw)); err != nil {
			return err
		}
		if active {
			return tx.Bucket(bucketActive).Put(clone(room[:]), clone(digest[:]))
		}
		return nil
	})
}

// Policy returns the policy with the digest.
func (s *Bolt) Policy(ctx context.Context, digest sig.Hash) ([]byte, error) {
	return s.get(ctx, bucketPolicies, digest[:])
}

func (s *Bolt) get(ctx context.Context, bucket, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v = clone(tx.Bucket(bucket).Get(key))
		return nil
	})
	if err == nil && v == nil {
		err = ErrNotFound
	}
	return v, err
}

// ActivePolicy returns the room's active policy.
func (s *Bolt) ActivePolicy(ctx context.Context, room sig.Hash) (digest sig.Hash, raw []byte, err error) {
	if err := ctx.Err(); err != nil {
		return digest, nil, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		d := tx.Bucket(bucketActive).Get(room[:])
		if len(d) != sig.HashSize {
			return ErrNotFound
		}
		copy(digest[:], d)
		raw = clone(tx.Bucket(bucketPolicies).Get(d))
		if raw == nil {
			return fmt.Errorf("store: room %s's active policy %s is not held", room, digest)
		}
		return nil
	})
	return digest, raw, err
}
