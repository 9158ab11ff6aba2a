package management

import (
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/tenancy"
)

// Project users: the platform admins' people (the reference's User). A
// user is invited (PENDING), their first management credential is issued
// once by a platform admin (ACTIVE), and that credential calls only the
// routes of the projects they are assigned to that their role there allows
// (roleAllows, the README's table).

const projectsPrefix = "/management/v1/projects/:projectId"

// roleAllows says whether a user of role in a project may call method on
// route, a route of that project (the part after projectsPrefix: "" is the
// project itself). ADMIN runs the project and its settings but cannot
// delete it; USER reads everything and writes the project's webhooks and
// schemas; VIEWER reads everything but its keys; MERCHANT, whose work is
// validating and redeeming through the application API, only reads the
// project.
func roleAllows(role, method, route string) bool {
	read := method == http.MethodGet || method == http.MethodHead
	switch role {
	case "ADMIN":
		return route != "" || method != http.MethodDelete
	case "USER":
		if read {
			return true
		}
		for _, p := range []string{"/webhooks", "/custom-event-schemas", "/metadata-schemas", "/stacking-rules"} {
			if route == p || strings.HasPrefix(route, p+"/") {
				return true
			}
		}
		return false
	case "VIEWER":
		return read && !strings.HasPrefix(route, "/api-keys")
	case "MERCHANT":
		return read && route == ""
	}
	return false
}

// authorize limits a project user's credential; a platform admin's key
// (one with no user) calls everything. It reads the user's role at each
// request, so an unassignment or a new role holds at once.
func (a *App) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, ok := identity.From(c.Request().Context())
		if !ok {
			return apierr.Unauthorized("Send valid X-Management-Id and X-Management-Token headers through the platform's router.")
		}
		projectID := ""
		route, inProject := strings.CutPrefix(c.Path(), projectsPrefix)
		if inProject && (route == "" || strings.HasPrefix(route, "/")) {
			projectID = c.Param("projectId")
		} else {
			inProject = false
		}
		userID, role, err := tenancy.KeyUser(c.Request().Context(), a.pool, id.KeyID, projectID)
		if err != nil && !errors.Is(err, tenancy.ErrKeyNotFound) {
			return err
		}
		if userID == "" {
			return next(c)
		}
		if !inProject || role == "" {
			return forbidden("this credential belongs to a project user: it calls only the routes of the projects they are assigned to")
		}
		if !roleAllows(role, c.Request().Method, route) {
			return forbidden("the role " + role + " in " + projectID + " may not call " + c.Request().Method + " " + c.Path())
		}
		return next(c)
	}
}

func forbidden(details string) error {
	return apierr.New(http.StatusForbidden, "forbidden", "Forbidden", details)
}

type userView struct {
	ID        string            `json:"id"`
	Login     string            `json:"login"`
	Email     string            `json:"email"`
	FirstName string            `json:"first_name"`
	LastName  string            `json:"last_name"`
	Projects  map[string]string `json:"projects"`
	Role      string            `json:"role,omitempty"`
	Status    string            `json:"status"`
	IsOwner   bool              `json:"is_owner"`
	Object    string            `json:"object"`
}

// viewUser renders a user as seen from a project: role is theirs there.
func viewUser(u tenancy.User, projectID string) userView {
	ps := u.Projects
	if ps == nil {
		ps = map[string]string{}
	}
	return userView{ID: u.ID, Login: u.Login, Email: u.Login, FirstName: u.FirstName, LastName: u.LastName, Projects: ps,
		Role: ps[projectID], Status: u.Status, Object: "user"}
}

// checkRole refuses a role that is not one of the four predefined ones.
// The reference also takes a custom role's ID, but custom roles are
// defined in its Dashboard and no API defines one, so in Tally every
// custom role ID names a role that does not exist: refused, saying so,
// rather than given some predefined role's rights the platform's admin
// never chose (the README's role table).
func checkRole(role *string) error {
	return checkRoleAt("role", role)
}

func checkRoleAt(field string, role *string) error {
	switch {
	case role == nil || *role == "":
		return apierr.InvalidPayload(field + " is required, one of ADMIN, USER, VIEWER, MERCHANT")
	case !slices.Contains(tenancy.Roles, *role):
		return apierr.InvalidPayload(fmt.Sprintf("%s %q is not a predefined role, and Tally defines no custom roles "+
			"(the reference makes them in its Dashboard, which no API reaches): give ADMIN, USER, VIEWER or MERCHANT", field, clipRole(*role)))
	}
	return nil
}

func clipRole(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func userNotFound(err error, id string) error {
	if errors.Is(err, tenancy.ErrUserNotFound) {
		return apierr.NotFound("user", id)
	}
	return err
}

// assignUser is POST /projects/{id}/users: an existing user, by id or
// login, given a role in the project.
func (h handler) assignUser(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	var in struct {
		ID    *string `json:"id"`
		Login *string `json:"login"`
		Role  *string `json:"role"`
	}
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if (in.ID == nil) == (in.Login == nil) {
		return apierr.InvalidPayload("give one of id and login: the user to assign")
	}
	if err := checkRole(in.Role); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var u tenancy.User
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		if in.Login != nil {
			found, err := tenancy.UserByLogin(ctx, tx, *in.Login)
			if err != nil {
				return userNotFound(err, *in.Login)
			}
			in.ID = &found.ID
		}
		if _, err := tenancy.GetUser(ctx, tx, *in.ID); err != nil {
			return userNotFound(err, *in.ID)
		}
		if err := tenancy.AssignUser(ctx, tx, p.ID, *in.ID, *in.Role); err != nil {
			return err
		}
		u, err = tenancy.GetUser(ctx, tx, *in.ID)
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewUser(u, p.ID))
}

// projectUser reads a user assigned to the request's project.
func (h handler) projectUser(c echo.Context, projectID string) (tenancy.User, error) {
	id := c.Param("userId")
	u, err := tenancy.GetUser(c.Request().Context(), h.pool, id)
	if err == nil && u.Projects[projectID] == "" {
		err = tenancy.ErrUserNotFound
	}
	return u, userNotFound(err, id)
}

func (h handler) listUsers(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	us, err := tenancy.ProjectUsers(c.Request().Context(), h.pool, p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.All(us, func(u tenancy.User) userView { return viewUser(u, p.ID) }))
}

func (h handler) getUser(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	u, err := h.projectUser(c, p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewUser(u, p.ID))
}

// updateUser is PUT /projects/{id}/users/{userId}: the user's role there.
func (h handler) updateUser(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	var in struct {
		Role *string `json:"role"`
	}
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if err := checkRole(in.Role); err != nil {
		return err
	}
	if _, err := h.projectUser(c, p.ID); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := tenancy.AssignUser(ctx, h.pool, p.ID, c.Param("userId"), *in.Role); err != nil {
		return err
	}
	u, err := h.projectUser(c, p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewUser(u, p.ID))
}

// unassignUser is DELETE /projects/{id}/users/{userId}; as the reference
// says, a user in only one project cannot be unassigned from it.
func (h handler) unassignUser(c echo.Context) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	u, err := h.projectUser(c, p.ID)
	if err != nil {
		return err
	}
	if len(u.Projects) == 1 {
		return apierr.New(http.StatusBadRequest, "user_in_one_project", "User in one project",
			"the user "+u.ID+" is assigned only to "+p.ID+" and cannot be unassigned from it; assign them elsewhere first")
	}
	if err := tenancy.UnassignUser(c.Request().Context(), h.pool, p.ID, u.ID); err != nil {
		return userNotFound(err, u.ID)
	}
	return c.NoContent(http.StatusNoContent)
}

// inviteUser is POST /projects/users/invite: a pending user with a role
// in each project named, answered 204 as the reference does (Tally sends
// no e-mail: the admin finds the user in the projects' lists and issues
// their credential).
func (h handler) inviteUser(c echo.Context) error {
	var in struct {
		Email     *string           `json:"email"`
		FirstName string            `json:"first_name"`
		LastName  string            `json:"last_name"`
		Projects  map[string]string `json:"projects"`
	}
	if err := httpx.Bind(c, &in); err != nil {
		return err
	}
	if in.Email == nil {
		return apierr.InvalidPayload("email is required: the invited user's login")
	}
	if a, err := mail.ParseAddress(*in.Email); err != nil || a.Address != *in.Email {
		return apierr.InvalidPayload("email must be an e-mail address")
	}
	if len(in.Projects) == 0 {
		return apierr.InvalidPayload("projects is required: {project id: role} for at least one project")
	}
	ctx := c.Request().Context()
	for pid, role := range in.Projects {
		if err := checkRoleAt("projects."+clipRole(pid), &role); err != nil {
			return err
		}
		if _, err := tenancy.GetProject(ctx, h.pool, pid); err != nil {
			return projectNotFound(err, pid)
		}
	}
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		u, err := tenancy.InviteUser(ctx, tx, *in.Email, in.FirstName, in.LastName)
		if errors.Is(err, db.ErrConflict) {
			return apierr.Duplicate("user", "a user with the login "+*in.Email+" exists already: assign them with POST /management/v1/projects/{id}/users")
		} else if err != nil {
			return err
		}
		for pid, role := range in.Projects {
			if err := tenancy.AssignUser(ctx, tx, pid, u.ID, role); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// issueCredential is POST /users/{userId}/credentials (Tally's): a
// pending user's first management credential, whose token is shown this
// once; a user who has one is 409.
func (h handler) issueCredential(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("userId")
	var key tenancy.ManagementKey
	var token string
	err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		if _, err := tenancy.GetUser(ctx, tx, id); err != nil {
			return userNotFound(err, id)
		}
		k, t, issued, err := tenancy.IssueUserKey(ctx, tx, id)
		if err == nil && !issued {
			return apierr.New(http.StatusConflict, "credential_already_issued", "Credential already issued",
				"the user "+id+" has had their credential: it is issued once, when they are pending")
		}
		key, token = k, t
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"management_id": key.ID, "management_token": token, "user_id": id,
		"object": "management_credential"})
}
