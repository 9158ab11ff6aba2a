package tenancy

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
)

// Roles are the predefined roles of a project user.
var Roles = []string{"ADMIN", "USER", "VIEWER", "MERCHANT"}

// Users' states: invited and without a credential yet, or holding one.
const (
	UserPending = "PENDING"
	UserActive  = "ACTIVE"
)

// ErrUserNotFound: no such user, or not assigned to the project asked.
var ErrUserNotFound = errors.New("tenancy: user not found")

// User is a project user, with their role in each project.
type User struct {
	ID        string
	Login     string
	FirstName string
	LastName  string
	Status    string
	CreatedAt time.Time
	Projects  map[string]string // project id → role
}

const userColumns = `u.id, u.login, u.first_name, u.last_name, u.status, u.created_at`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Login, &u.FirstName, &u.LastName, &u.Status, &u.CreatedAt)
	return u, err
}

// withProjects reads the users' roles in every project.
func withProjects(ctx context.Context, q db.Querier, us []User) ([]User, error) {
	if len(us) == 0 {
		return us, nil
	}
	idx := map[string]int{}
	userIDs := make([]string, len(us))
	for i, u := range us {
		idx[u.ID], userIDs[i] = i, u.ID
		us[i].Projects = map[string]string{}
	}
	rows, err := q.Query(ctx, `SELECT user_id, project_id, role FROM project_users WHERE user_id = ANY($1::TEXT[])`, userIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var u, p, r string
		if err := rows.Scan(&u, &p, &r); err != nil {
			return nil, err
		}
		us[idx[u]].Projects[p] = r
	}
	return us, rows.Err()
}

// UserByLogin finds a user by login (their e-mail address).
func UserByLogin(ctx context.Context, q db.Querier, login string) (User, error) {
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users u WHERE u.login = $1`, login))
	if errors.Is(err, db.ErrNotFound) {
		return User{}, ErrUserNotFound
	}
	return u, err
}

// GetUser reads a user with their projects.
func GetUser(ctx context.Context, q db.Querier, id string) (User, error) {
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users u WHERE u.id = $1`, id))
	if errors.Is(err, db.ErrNotFound) {
		return User{}, ErrUserNotFound
	}
	if err != nil {
		return User{}, err
	}
	us, err := withProjects(ctx, q, []User{u})
	if err != nil {
		return User{}, err
	}
	return us[0], nil
}

// ProjectUsers are the users assigned to a project, by id.
func ProjectUsers(ctx context.Context, q db.Querier, projectID string) ([]User, error) {
	us, err := db.Collect(scanUser)(q.Query(ctx, `SELECT `+userColumns+` FROM users u
		JOIN project_users pu ON pu.user_id = u.id WHERE pu.project_id = $1 ORDER BY u.id`, projectID))
	if err != nil {
		return nil, err
	}
	return withProjects(ctx, q, us)
}

// InviteUser creates a pending user; their login must be new.
func InviteUser(ctx context.Context, q db.Querier, login, first, last string) (User, error) {
	u := User{ID: ids.New("user_"), Login: login, FirstName: first, LastName: last, Status: UserPending,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	_, err := q.Exec(ctx, `INSERT INTO users (id, login, first_name, last_name, status, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		u.ID, u.Login, u.FirstName, u.LastName, u.Status, u.CreatedAt)
	return u, err
}

// AssignUser gives a user a role in a project, or changes it.
func AssignUser(ctx context.Context, q db.Querier, projectID, userID, role string) error {
	_, err := q.Exec(ctx, `INSERT INTO project_users (project_id, user_id, role, created_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role, updated_at = now()`, projectID, userID, role)
	return err
}

// UnassignUser removes a user from a project.
func UnassignUser(ctx context.Context, q db.Querier, projectID, userID string) error {
	tag, err := q.Exec(ctx, `DELETE FROM project_users WHERE project_id = $1 AND user_id = $2`, projectID, userID)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrUserNotFound
	}
	return err
}

// IssueUserKey makes a pending user's first management credential and
// makes them active; a user who already has one gets none (false).
func IssueUserKey(ctx context.Context, q db.Querier, userID string) (ManagementKey, string, bool, error) {
	tag, err := q.Exec(ctx, `UPDATE users SET status = $2 WHERE id = $1 AND status = $3`, userID, UserActive, UserPending)
	if err != nil || tag.RowsAffected() == 0 {
		return ManagementKey{}, "", false, err
	}
	id, token := newKeyPair()
	k := ManagementKey{ID: id, Name: "user " + userID, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), tokenHash: hashToken(token)}
	_, err = q.Exec(ctx, `INSERT INTO management_keys (id, name, token_hash, created_at, user_id) VALUES ($1, $2, $3, $4, $5)`,
		k.ID, k.Name, k.tokenHash, k.CreatedAt, userID)
	if err != nil {
		return ManagementKey{}, "", false, err
	}
	return k, token, true, RecordChange(ctx, q, ChangeManagementKey, k.ID)
}

// KeyUser is whom a management key acts for: "" for a platform admin's
// key, else the user and their role in projectID ("" where they have none).
func KeyUser(ctx context.Context, q db.Querier, keyID, projectID string) (userID, role string, err error) {
	var u, r *string
	err = q.QueryRow(ctx, `SELECT k.user_id, pu.role FROM management_keys k
		LEFT JOIN project_users pu ON pu.user_id = k.user_id AND pu.project_id = $2 WHERE k.id = $1`, keyID, projectID).Scan(&u, &r)
	if errors.Is(err, db.ErrNotFound) {
		return "", "", ErrKeyNotFound
	}
	if u != nil {
		userID = *u
	}
	if r != nil {
		role = *r
	}
	return userID, role, err
}
