package api

import (
	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine/field"
)

// handler serves one operation; write marks the operations that change
// state, the ones an Idempotency-Key applies to.
type handler struct {
	fn    func(c *call) (result, error)
	write bool
}

var handlers = map[Op]handler{
	ListWorkspaces:  {fn: (*call).listWorkspaces},
	CreateWorkspace: {fn: (*call).createWorkspace, write: true},
	ListAPIKeys:     {fn: (*call).listKeys},
	CreateAPIKey:    {fn: (*call).createKey, write: true},
	RevokeAPIKey:    {fn: (*call).revokeKey, write: true},

	ListAgents:          {fn: (*call).listAgents},
	CreateAgent:         {fn: (*call).createAgent, write: true},
	GetAgent:            {fn: (*call).getAgent},
	RecordSignal:        {fn: (*call).recordSignal, write: true},
	CreateRun:           {fn: (*call).createRun, write: true},
	GetRun:              {fn: (*call).getRun},
	FinishRun:           {fn: (*call).finishRun, write: true},
	ClaimObject:         {fn: (*call).claimObject, write: true},
	RegisterTrace:       {fn: (*call).registerTrace, write: true},
	ListRunSignals:      {fn: (*call).listRunSignals},
	GetReward:           {fn: (*call).getReward},
	GetObjective:        {fn: (*call).getObjective},
	GetObjectiveVersion: {fn: (*call).getObjectiveVersion},
	PutObjective:        {fn: (*call).putObjective, write: true},
	PreviewObjective:    {fn: (*call).previewObjective},
	VersionRewards:      {fn: (*call).versionRewards},
	ListVariations:      {fn: (*call).listVariations},
	CreateVariation:     {fn: (*call).createVariation, write: true},
	GetVariation:        {fn: (*call).getVariation},
	AgentOverview:       {fn: (*call).agentOverview},

	ReportReward: {fn: (*call).reportReward, write: true},
	ListEvidence: {fn: (*call).listEvidence},

	CreateObjective:       {fn: (*call).createObjective, write: true},
	GetObjectiveRun:       {fn: (*call).getObjectiveRun},
	CreateFeedback:        {fn: (*call).createFeedback, write: true},
	ListObjectiveFeedback: {fn: (*call).listObjectiveFeedback},
	ListAgentFeedback:     {fn: (*call).listAgentFeedback},
	GetAgentVariation:     {fn: (*call).getAgentVariation},

	CreateTask:        {fn: (*call).createTask, write: true},
	ListTasks:         {fn: (*call).listTasks},
	GetTask:           {fn: (*call).getTask},
	GetTaskVersion:    {fn: (*call).getTaskVersion},
	PutJudgeVersion:   {fn: (*call).putJudgeVersion, write: true},
	ListJudgeVersions: {fn: (*call).listJudgeVersions},

	CreateJudgedReward: {fn: (*call).createJudgedReward, write: true},
	JudgeSignals:       {fn: (*call).judgeSignals, write: true},
	ReviewScores:       {fn: (*call).reviewScores},
	RunDurable:         {fn: (*call).runDurable},
	GetJudgedReward:    {fn: (*call).getJudgedReward},
	TaskCalibration:    {fn: (*call).taskCalibration},
	TaskRewardSummary:  {fn: (*call).taskRewardSummary},

	GetCluster: {fn: (*call).getCluster},
}

// BodyArgs maps a body's top-level members to the text an argument of a
// query string would have: a string its value, a number its text, null
// nothing (as if absent), and any other value its JSON, so that an
// argument's parse refuses it naming the member (objective_version: true).
// A door without paths and query strings (NATS) takes its targets and
// arguments from the body. A member named in strs must be a string: a
// target, which a number would only name by accident.
func BodyArgs(raw []byte, strs ...string) (map[string]string, error) {
	args := map[string]string{}
	if len(raw) == 0 {
		return args, nil
	}
	_, err := field.ParseJSON(raw, "", func(v *fastjson.Value) (struct{}, error) {
		o, err := v.Object()
		if err != nil {
			return struct{}{}, field.Errorf("", "body must be a JSON object")
		}
		for _, name := range strs {
			if m := o.Get(name); m != nil && m.Type() != fastjson.TypeString && m.Type() != fastjson.TypeNull {
				return struct{}{}, field.Errorf(name, "must be a string")
			}
		}
		o.Visit(func(k []byte, m *fastjson.Value) {
			switch m.Type() {
			case fastjson.TypeString:
				args[string(k)] = string(m.GetStringBytes())
			case fastjson.TypeNull:
			default:
				args[string(k)] = string(m.MarshalTo(nil))
			}
		})
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return args, nil
}
