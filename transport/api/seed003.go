package api

import (
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/judging"
)

// Seed 003: tasks, their content-addressed versions, and judge versions,
// in the key's home workspace. (Judged rewards, POST /v1/rewards, are to
// come.)
//
//	POST /v1/tasks                          a version of a task: 201 new, 200 known
//	GET  /v1/tasks/{id}                     its versions, oldest first, and the current one
//	GET  /v1/tasks/{id}/versions/{tv}       one version
//	PUT  /v1/judge-versions/{jv}            publish a judge version: 201, 200 the same again, 409 another
//	GET  /v1/judge-versions                 j1 and the published ones

func (c *call) createTask() (result, error) {
	t, err := judge.Parse(c.req.Body, "")
	if err != nil {
		return result{}, err
	}
	tv, created, err := c.s.judging.PutTask(c.ws, t)
	if err != nil {
		return result{}, err
	}
	return result{status: statusFor(created), body: appendTaskVersion(nil, tv)}, nil
}

func (c *call) getTask() (result, error) {
	versions, err := c.s.judging.TaskVersions(c.ws, c.req.Target.Task)
	if err != nil {
		return result{}, err
	}
	if len(versions) == 0 {
		return result{}, notFound("task", c.req.Target.Task)
	}
	b := append([]byte(nil), '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, c.req.Target.Task)
	b = jsonw.Key(b, "current")
	b = jsonw.String(b, versions[len(versions)-1].Version)
	b = jsonw.Key(b, "items")
	b = append(b, '[')
	for i, tv := range versions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTaskVersion(b, tv)
	}
	return ok(append(b, "]}"...))
}

func (c *call) getTaskVersion() (result, error) {
	tv, err := c.s.judging.TaskVersion(c.ws, c.req.Target.Task, c.req.Target.Version)
	if err != nil {
		return result{}, err
	}
	return ok(appendTaskVersion(nil, tv))
}

// appendTaskVersion renders {"object": "task_version", id, version, seq,
// created_at, task: the canonical task, defaults filled in}.
func appendTaskVersion(b []byte, tv judging.TaskVersion) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "object")
	b = jsonw.String(b, "task_version")
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, tv.Task.ID)
	b = jsonw.Key(b, "version")
	b = jsonw.String(b, tv.Version)
	b = jsonw.Key(b, "seq")
	b = jsonw.Int(b, int64(tv.Seq))
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, tv.CreatedAt)
	b = jsonw.Key(b, "task")
	b = tv.Task.AppendJSON(b)
	return append(b, '}')
}

func (c *call) putJudgeVersion() (result, error) {
	jv, err := judging.ParseJudgeVersion(c.req.Target.Version, c.req.Body)
	if err != nil {
		return result{}, err
	}
	jv, created, err := c.s.judging.PublishJudgeVersion(c.ws, jv)
	if err != nil {
		return result{}, err
	}
	return result{status: statusFor(created), body: jv.AppendJSON(nil)}, nil
}

func (c *call) listJudgeVersions() (result, error) {
	jvs, err := c.s.judging.JudgeVersions(c.ws)
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, jvs, func(b []byte, jv judging.JudgeVersion) []byte { return jv.AppendJSON(b) }))
}
